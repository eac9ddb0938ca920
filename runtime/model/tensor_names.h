// Canonical tensor names inside a bundle, whatever the checkpoint called them.
// Per-layer names are "layers.<i>.<suffix>".
#pragma once

namespace tern::tensor_names {

inline constexpr const char* kTokEmbeddings = "tok_embeddings";  // [vocab, hidden]
inline constexpr const char* kFinalNorm = "norm";                // [hidden]
inline constexpr const char* kLmHead = "lm_head";                // [vocab, hidden]; absent when tied

// Per layer.
inline constexpr const char* kAttnNorm = "attn_norm";         // [hidden] (absent for bitllama2c)
inline constexpr const char* kWq = "wq";                      // [heads*head_dim, hidden] ternary
inline constexpr const char* kWk = "wk";                      // [kv_heads*head_dim, hidden] ternary
inline constexpr const char* kWv = "wv";                      // [kv_heads*head_dim, hidden] ternary
inline constexpr const char* kAttnSubNorm = "attn_sub_norm";  // [heads*head_dim] (2B-4T)
inline constexpr const char* kWo = "wo";                      // [hidden, heads*head_dim] ternary
inline constexpr const char* kFfnNorm = "ffn_norm";           // [hidden]
inline constexpr const char* kWGate = "w_gate";               // [ffn, hidden] ternary
inline constexpr const char* kWUp = "w_up";                   // [ffn, hidden] ternary
inline constexpr const char* kFfnSubNorm = "ffn_sub_norm";    // [ffn] (2B-4T)
inline constexpr const char* kWDown = "w_down";               // [hidden, ffn] ternary
// The embedding families (Qwen3 / Gemma3 BitNet).
inline constexpr const char* kWqInNorm = "wq_in_norm";          // [hidden] RMSNorm of wq's input
inline constexpr const char* kWkInNorm = "wk_in_norm";          // [hidden]
inline constexpr const char* kWvInNorm = "wv_in_norm";          // [hidden]
inline constexpr const char* kWGateInNorm = "w_gate_in_norm";   // [hidden]
inline constexpr const char* kWUpInNorm = "w_up_in_norm";       // [hidden]
inline constexpr const char* kQNorm = "q_norm";                 // [head_dim] per query head
inline constexpr const char* kKNorm = "k_norm";                 // [head_dim] per key head
inline constexpr const char* kPostAttnNorm = "post_attn_norm";  // [hidden] (Gemma3)
inline constexpr const char* kPostFfnNorm = "post_ffn_norm";    // [hidden] (Gemma3)

}  // namespace tern::tensor_names
