// Build-time generator of the Unicode normalization form C tables runtime/text/unicode_nfc.cpp
// reads, from the Unicode Character Database: UnicodeData.txt (canonical combining classes
// and canonical decompositions) and DerivedNormalizationProps.txt (NFC_QC, Full_Composition_
// Exclusion). Host tool; run by an add_custom_command.
//   nfc_gen UnicodeData.txt DerivedNormalizationProps.txt out.cpp
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kCodePoints = 0x110000;
constexpr uint32_t kBlock = 256;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string f;
  while (std::getline(ss, f, sep)) out.push_back(f);
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

using Decompositions = std::map<uint32_t, std::vector<uint32_t>>;

// Full canonical decompositions (Hangul syllables are algorithmic, not in the table).
Decompositions full_decompositions(const Decompositions& decomposition) {
  Decompositions full;
  for (const auto& [cp, d] : decomposition) {
    std::vector<uint32_t> out = d, next;
    for (bool changed = true; changed;) {
      changed = false;
      next.clear();
      for (uint32_t c : out) {
        auto it = decomposition.find(c);
        if (it != decomposition.end()) {
          next.insert(next.end(), it->second.begin(), it->second.end());
          changed = true;
        } else {
          next.push_back(c);
        }
      }
      out.swap(next);
    }
    full[cp] = out;
  }
  return full;
}

// Primary composites: two-character canonical decompositions not excluded.
std::vector<std::array<uint32_t, 3>> primary_composites(const Decompositions& decomposition,
                                                        const std::set<uint32_t>& excluded) {
  std::vector<std::array<uint32_t, 3>> compose;
  for (const auto& [cp, d] : decomposition) {
    if (d.size() == 2 && excluded.count(cp) == 0) compose.push_back({d[0], d[1], cp});
  }
  std::sort(compose.begin(), compose.end());
  return compose;
}

// The two-stage table of `info`: stage1 holds each block's index among the distinct blocks.
void split_blocks(const std::vector<uint16_t>& info, std::vector<uint16_t>* stage1,
                  std::vector<std::vector<uint16_t>>* blocks) {
  std::map<std::vector<uint16_t>, uint16_t> index;
  for (uint32_t b = 0; b < kCodePoints / kBlock; ++b) {
    std::vector<uint16_t> block(info.begin() + b * kBlock, info.begin() + (b + 1) * kBlock);
    auto it = index.find(block);
    if (it == index.end()) {
      it = index.emplace(block, static_cast<uint16_t>(blocks->size())).first;
      blocks->push_back(block);
    }
    stage1->push_back(it->second);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s UnicodeData.txt DerivedNormalizationProps.txt out.cpp\n", argv[0]);
    return 2;
  }
  std::ifstream data(argv[1]), props(argv[2]);
  if (!data || !props) {
    std::fprintf(stderr, "nfc_gen: cannot read %s or %s\n", argv[1], argv[2]);
    return 1;
  }
  std::vector<uint16_t> info(kCodePoints, 0);  // ccc | 0x100 when NFC_QC is not Yes
  Decompositions decomposition;                // canonical, one level
  std::string line;
  size_t rows = 0;
  while (std::getline(data, line)) {
    const auto f = split(line, ';');
    if (f.size() < 6) continue;
    const uint32_t cp = static_cast<uint32_t>(std::stoul(f[0], nullptr, 16));
    info[cp] = static_cast<uint16_t>(std::stoul(f[3]));
    if (!f[5].empty() && f[5][0] != '<') {  // "<compat>" mappings are not canonical
      std::vector<uint32_t> d;
      for (const auto& x : split(f[5], ' ')) {
        if (!x.empty()) d.push_back(static_cast<uint32_t>(std::stoul(x, nullptr, 16)));
      }
      decomposition[cp] = d;
    }
    ++rows;
  }
  std::set<uint32_t> excluded;
  size_t qc = 0;
  while (std::getline(props, line)) {
    line = line.substr(0, line.find('#'));
    const auto f = split(line, ';');
    if (f.size() < 2) continue;
    const std::string range = trim(f[0]), prop = trim(f[1]);
    const size_t dots = range.find("..");
    const uint32_t first = static_cast<uint32_t>(std::stoul(range.substr(0, dots), nullptr, 16));
    const uint32_t last =
        dots == std::string::npos ? first : static_cast<uint32_t>(std::stoul(range.substr(dots + 2), nullptr, 16));
    for (uint32_t c = first; c <= last; ++c) {
      if (prop == "NFC_QC") {
        info[c] |= 0x100;  // N or M
        ++qc;
      } else if (prop == "Full_Composition_Exclusion") {
        excluded.insert(c);
      }
    }
  }
  if (rows < 1000 || qc < 100 || excluded.size() < 100) {
    std::fprintf(stderr, "nfc_gen: %zu rows, %zu NFC_QC entries, %zu exclusions: not the UCD files?\n", rows, qc,
                 excluded.size());
    return 1;
  }

  const auto full = full_decompositions(decomposition);
  const auto compose = primary_composites(decomposition, excluded);
  std::vector<uint16_t> stage1;
  std::vector<std::vector<uint16_t>> blocks;
  split_blocks(info, &stage1, &blocks);

  std::ofstream out(argv[3]);
  out << "// Generated by runtime/text/tools/nfc_gen.cpp from " << argv[1] << " and " << argv[2] << ". Do not edit.\n";
  out << "#include <cstdint>\n\nnamespace tern::nfc_tables {\n\n";
  out << "extern const uint16_t kStage1[" << stage1.size() << "];\nconst uint16_t kStage1[" << stage1.size() << "] = {";
  for (size_t i = 0; i < stage1.size(); ++i) out << (i % 24 == 0 ? "\n" : "") << stage1[i] << ",";
  out << "\n};\n";
  out << "extern const uint16_t kStage2[" << blocks.size() * kBlock << "];\nconst uint16_t kStage2["
      << blocks.size() * kBlock << "] = {";
  size_t n = 0;
  for (const auto& block : blocks) {
    for (uint16_t v : block) out << (n++ % 24 == 0 ? "\n" : "") << v << ",";
  }
  out << "\n};\n";
  std::vector<uint32_t> flat;
  out << "struct Decomposition { uint32_t cp; uint16_t offset; uint16_t size; };\n";
  out << "extern const uint32_t kDecompositionCount;\nconst uint32_t kDecompositionCount = " << full.size() << ";\n";
  out << "extern const Decomposition kDecompositions[" << full.size() << "];\nconst Decomposition kDecompositions["
      << full.size() << "] = {";
  n = 0;
  for (const auto& [cp, d] : full) {
    out << (n++ % 6 == 0 ? "\n" : "") << "{" << cp << "," << flat.size() << "," << d.size() << "},";
    flat.insert(flat.end(), d.begin(), d.end());
  }
  out << "\n};\n";
  out << "extern const uint32_t kDecompositionData[" << flat.size() << "];\nconst uint32_t kDecompositionData["
      << flat.size() << "] = {";
  for (size_t i = 0; i < flat.size(); ++i) out << (i % 12 == 0 ? "\n" : "") << flat[i] << ",";
  out << "\n};\n";
  out << "struct Composition { uint32_t first; uint32_t second; uint32_t composite; };\n";
  out << "extern const uint32_t kCompositionCount;\nconst uint32_t kCompositionCount = " << compose.size() << ";\n";
  out << "extern const Composition kCompositions[" << compose.size() << "];\nconst Composition kCompositions["
      << compose.size() << "] = {";
  for (size_t i = 0; i < compose.size(); ++i) {
    out << (i % 6 == 0 ? "\n" : "") << "{" << compose[i][0] << "," << compose[i][1] << "," << compose[i][2] << "},";
  }
  out << "\n};\n\n}  // namespace tern::nfc_tables\n";
  return out ? 0 : 1;
}
