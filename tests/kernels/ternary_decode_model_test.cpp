// The decode-speed model against kernels/tools/predict_tok_s.py (the same model in Python)
// on its case, BitNet 2B-4T with a q4 lm_head. The expected numbers are that script's
// output at more digits:
//   python3 -c "exec(open('kernels/tools/predict_tok_s.py').read().replace(':.1f}', ':.4f}'))"
#include "kernels/ternary_decode_model.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

// One layer's ternary matrices (rows x cols): q, k, v, o, gate, up, down.
constexpr size_t kMats[7][2] = {{2560, 2560}, {640, 2560},  {640, 2560}, {2560, 2560},
                                {6912, 2560}, {6912, 2560}, {2560, 6912}};
constexpr double kLayers = 30;

DecodeWork bitnet_2b4t(TernaryLayout layout) {
  DecodeWork w;
  for (const auto& m : kMats) {
    w.ternary_weights += kLayers * static_cast<double>(m[0] * m[1]);
    w.ternary_bytes += kLayers * static_cast<double>(ternary_packed_size(layout, m[0], m[1]));
  }
  w.other_bytes = 128256.0 * 2560.0 * 4.5 / 8.0;  // lm_head, q4 with a scale per 64 columns
  return w;
}

TEST(TernaryDecodeModel, MatchesPredictTokSScript) {
  const DecodeWork t2 = bitnet_2b4t(TernaryLayout::T2Interleaved16);
  const DecodeWork t3 = bitnet_2b4t(TernaryLayout::T3Interleaved16);
  // "t2i16: 521.0112 MB ternary", "t3i16: 416.9318 MB ternary": the script's tile
  // arithmetic and ternary_packed_size agree.
  EXPECT_NEAR(t2.ternary_bytes / 1e6, 521.0112, 1e-4);
  EXPECT_NEAR(t3.ternary_bytes / 1e6, 416.9318, 1e-4);
  EXPECT_NEAR(t2.ternary_weights / 1e9, 2.084045, 1e-6);
  struct Row {
    const char* device;
    TernaryLayout layout;
    double tok_s_1, tok_s_4;
  };
  const Row rows[] = {
      {"pi4", TernaryLayout::T2Interleaved16, 6.8385, 7.8787},
      {"pi4", TernaryLayout::T3Interleaved16, 3.8049, 9.2417},
      {"pi5", TernaryLayout::T2Interleaved16, 10.4860, 10.4860},
      {"pi5", TernaryLayout::T3Interleaved16, 6.5099, 12.3001},
      {"android6g", TernaryLayout::T2Interleaved16, 18.5200, 20.8304},
      {"android6g", TernaryLayout::T3Interleaved16, 6.5642, 24.4340},
  };
  for (const Row& r : rows) {
    const DecodeDevice* d = find_decode_device(r.device);
    ASSERT_NE(d, nullptr) << r.device;
    const DecodeWork& w = r.layout == TernaryLayout::T3Interleaved16 ? t3 : t2;
    EXPECT_NEAR(predict_decode_tok_s(*d, r.layout, w, 1), r.tok_s_1, 1e-4) << r.device << " " << to_string(r.layout);
    EXPECT_NEAR(predict_decode_tok_s(*d, r.layout, w, 4), r.tok_s_4, 1e-4) << r.device << " " << to_string(r.layout);
  }
}

TEST(TernaryDecodeModel, NoPredictionWithoutKernelsOrDevice) {
  const DecodeDevice* pi4 = find_decode_device("pi4");
  ASSERT_NE(pi4, nullptr);
  EXPECT_EQ(predict_decode_tok_s(*pi4, TernaryLayout::T2RowMajor, bitnet_2b4t(TernaryLayout::T2RowMajor), 1), 0.0);
  EXPECT_EQ(predict_decode_tok_s(*pi4, TernaryLayout::T2Interleaved16, bitnet_2b4t(TernaryLayout::T2Interleaved16), 0),
            0.0);
  EXPECT_EQ(find_decode_device("iphone4g"), nullptr);  // no cycle counts for Apple cores
  EXPECT_EQ(find_decode_device(nullptr), nullptr);
}

}  // namespace
}  // namespace tern
