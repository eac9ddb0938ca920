/* SPDX-License-Identifier: MIT */
/* The one error vocabulary of Tern, shared by the C++ `tern::Error` enum and the
 * C API's `tern_status`. Plain C so the public header can include it.
 *
 * Codes are grouped by their high nibble so a caller can tell the family of a
 * failure from its number: 0x0_ general, 0x1_ memory, 0x2_ I/O, 0x3_ bundle format,
 * 0x4_ input, 0x5_ platform. Evolution: append codes, never renumber or reuse. */
#ifndef TERN_ERROR_CODES_H_
#define TERN_ERROR_CODES_H_

/* X(CxxName, C_NAME, value, "default message") */
#define TERN_ERROR_LIST(X)                                                            \
  X(Ok, OK, 0x00, "ok")                                                               \
  X(Internal, INTERNAL, 0x01, "internal error")                                       \
  X(InvalidArgument, INVALID_ARGUMENT, 0x02, "invalid argument")                      \
  X(NotSupported, NOT_SUPPORTED, 0x03, "not supported")                               \
  X(NotFound, NOT_FOUND, 0x04, "not found")                                           \
  X(Aborted, ABORTED, 0x05, "aborted by the caller")                                  \
  X(InvalidState, INVALID_STATE, 0x06, "operation not valid in the current state")    \
  X(OutOfRange, OUT_OF_RANGE, 0x07, "value out of range")                             \
  X(OutOfMemory, OUT_OF_MEMORY, 0x10, "out of memory")                                \
  X(BudgetTooSmall, BUDGET_TOO_SMALL, 0x11, "memory budget too small")                \
  X(ContextFull, CONTEXT_FULL, 0x12, "context is full")                               \
  X(ArenaExhausted, ARENA_EXHAUSTED, 0x13, "arena exhausted")                         \
  X(GrammarTooLarge, GRAMMAR_TOO_LARGE, 0x14, "grammar too large for its memory")     \
  X(IoError, IO_ERROR, 0x20, "I/O error")                                             \
  X(FileNotFound, FILE_NOT_FOUND, 0x21, "file not found")                             \
  X(CorruptFile, CORRUPT_FILE, 0x22, "corrupt or malformed input file")               \
  X(BadMagic, BAD_MAGIC, 0x23, "wrong file magic (not the expected format)")          \
  X(InvalidBundle, INVALID_BUNDLE, 0x30, "invalid bundle")                            \
  X(BadIdentifier, BAD_IDENTIFIER, 0x31, "not a Tern bundle (bad file identifier)")   \
  X(VersionMismatch, VERSION_MISMATCH, 0x32, "unsupported bundle format version")     \
  X(Truncated, TRUNCATED, 0x33, "file truncated")                                     \
  X(UnknownTensor, UNKNOWN_TENSOR, 0x34, "unknown or missing tensor")                 \
  X(ShapeMismatch, SHAPE_MISMATCH, 0x35, "tensor shape mismatch")                     \
  X(UnsupportedType, UNSUPPORTED_TYPE, 0x36, "unsupported tensor type or layout")     \
  X(UnsupportedModel, UNSUPPORTED_MODEL, 0x37, "unsupported model architecture")      \
  X(InvalidUtf8, INVALID_UTF8, 0x40, "invalid UTF-8")                                 \
  X(PromptTooLong, PROMPT_TOO_LONG, 0x41, "prompt longer than the context")           \
  X(InvalidToken, INVALID_TOKEN, 0x42, "token id out of range")                       \
  X(InvalidGrammar, INVALID_GRAMMAR, 0x43, "invalid grammar")                         \
  X(UnsupportedSchema, UNSUPPORTED_SCHEMA, 0x44, "JSON Schema keyword not supported") \
  X(UnsupportedCpu, UNSUPPORTED_CPU, 0x50, "CPU lacks a required instruction set")    \
  X(ThreadError, THREAD_ERROR, 0x51, "thread pool error")

#endif /* TERN_ERROR_CODES_H_ */
