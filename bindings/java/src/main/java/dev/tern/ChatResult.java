package dev.tern;

import java.util.List;

/**
 * The end of a {@link Session#complete} call: why it finished, the reply's text (content; ""
 * when it is a tool call), the call it made (name and the arguments as generated; cut short when
 * finishReason is LENGTH), the token counts (cachedTokens of promptTokens were held by the
 * session already) and, when asked for, a log-probability per generated token.
 */
public record ChatResult(FinishReason finishReason, String content, List<ToolCall> toolCalls, int promptTokens,
                         int cachedTokens, int completionTokens, double prefillSeconds, double decodeSeconds,
                         List<Logprob> logprobs) {
  public enum FinishReason {
    /** An end token, a stop string, the grammar's end, or the listener said stop. */
    STOP,
    /** maxTokens or the context. */
    LENGTH,
    /** A complete tool call. */
    TOOL_CALLS
  }

  /** A generated token and its top alternatives (most likely first). */
  public record Logprob(TokenLogprob chosen, List<TokenLogprob> top) {}

  public ChatResult {
    toolCalls = List.copyOf(toolCalls);
    logprobs = List.copyOf(logprobs);
  }

  /** Prefill and decode time. */
  public double seconds() {
    return prefillSeconds + decodeSeconds;
  }
}
