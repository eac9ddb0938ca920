// Canonical tensor names inside a bundle, whatever the checkpoint called them.
// Per-layer names are "layers.<i>.<suffix>".
#pragma once

namespace tern::tensor_names {

inline constexpr const char* kTokEmbeddings = "tok_embeddings";  // [vocab, hidden]
inline constexpr const char* kFinalNorm = "norm";                // [hidden]
inline constexpr const char* kLmHead = "lm_head";                // [vocab, hidden]; absent when tied

// Per layer.
inline constexpr const char* kAttnNorm = "attn_norm";        // [hidden] (absent for bitllama2c)
inline constexpr const char* kWq = "wq";                     // [heads*head_dim, hidden] ternary
inline constexpr const char* kWk = "wk";                     // [kv_heads*head_dim, hidden] ternary
inline constexpr const char* kWv = "wv";                     // [kv_heads*head_dim, hidden] ternary
inline constexpr const char* kAttnSubNorm = "attn_sub_norm";  // [heads*head_dim] (2B-4T)
inline constexpr const char* kWo = "wo";                     // [hidden, heads*head_dim] ternary
inline constexpr const char* kFfnNorm = "ffn_norm";          // [hidden]
inline constexpr const char* kWGate = "w_gate";              // [ffn, hidden] ternary
inline constexpr const char* kWUp = "w_up";                  // [ffn, hidden] ternary
inline constexpr const char* kFfnSubNorm = "ffn_sub_norm";   // [ffn] (2B-4T)
inline constexpr const char* kWDown = "w_down";              // [hidden, ffn] ternary

}  // namespace tern::tensor_names
