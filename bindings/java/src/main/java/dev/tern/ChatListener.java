package dev.tern;

/**
 * Receives a {@link Session#complete} reply as it is generated. Every method returns whether to
 * go on (false stops generation: finish reason STOP); override the ones you need. An exception
 * thrown here stops generation and propagates from complete().
 */
public interface ChatListener {
  /** Text of the reply (whole characters). */
  default boolean onContent(String text) {
    return true;
  }

  /** A tool call begins: the function's name. index: the call's number in the reply (0). */
  default boolean onToolCall(int index, String name) {
    return true;
  }

  /** The next piece of call `index`'s arguments (JSON text). */
  default boolean onToolArguments(int index, String text) {
    return true;
  }

  /**
   * With {@link ChatRequest.Builder#logprobs}: a generated token, before its text arrives,
   * and the most likely alternatives (most likely first; empty without topLogprobs).
   */
  default boolean onToken(TokenLogprob chosen, TokenLogprob[] top) {
    return true;
  }

  /** A listener that streams the content to `content` (its return value says whether to go on). */
  static ChatListener content(TokenListener content) {
    return new ChatListener() {
      @Override
      public boolean onContent(String text) {
        return content.onText(text);
      }
    };
  }
}
