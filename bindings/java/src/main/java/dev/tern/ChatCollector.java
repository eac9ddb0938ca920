package dev.tern;

import java.util.ArrayList;
import java.util.List;

/**
 * What the JNI layer calls with a {@link Session#complete} call's events: gathers the reply
 * (content, calls, logprobs) and passes each event on to the caller's listener.
 */
final class ChatCollector {
  private final ChatListener listener;
  private final StringBuilder content = new StringBuilder();
  private final List<String> names = new ArrayList<>();
  private final List<StringBuilder> arguments = new ArrayList<>();
  private final List<ChatResult.Logprob> logprobs = new ArrayList<>();

  ChatCollector(ChatListener listener) {
    this.listener = listener;
  }

  boolean content(String text) {
    content.append(text);
    return listener == null || listener.onContent(text);
  }

  private void grow(int index) {
    while (names.size() <= index) {
      names.add("");
      arguments.add(new StringBuilder());
    }
  }

  boolean toolCall(int index, String name) {
    grow(index);
    names.set(index, name);
    return listener == null || listener.onToolCall(index, name);
  }

  boolean toolArguments(int index, String text) {
    grow(index);  // the runtime sends a call's name first: this only guards the index
    arguments.get(index).append(text);
    return listener == null || listener.onToolArguments(index, text);
  }

  /** Entry 0 is the chosen token, the rest its alternatives; token i's bytes end at ends[i]. */
  boolean token(int[] tokens, float[] values, byte[] bytes, int[] ends) {
    final TokenLogprob[] all = new TokenLogprob[tokens.length];
    for (int i = 0, begin = 0; i < all.length; begin = ends[i++]) {
      all[i] = new TokenLogprob(tokens[i], values[i], java.util.Arrays.copyOfRange(bytes, begin, ends[i]));
    }
    final TokenLogprob[] top = java.util.Arrays.copyOfRange(all, 1, all.length);
    logprobs.add(new ChatResult.Logprob(all[0], List.of(top)));
    return listener == null || listener.onToken(all[0], top);
  }

  /** stats: finish reason, tool calls, prompt / cached / completion tokens, prefill / decode seconds. */
  ChatResult result(double[] stats) {
    final List<ToolCall> calls = new ArrayList<>();
    for (int i = 0; i < names.size(); ++i) calls.add(new ToolCall(null, names.get(i), arguments.get(i).toString()));
    return new ChatResult(ChatResult.FinishReason.values()[(int) stats[0]], content.toString(), calls, (int) stats[2],
                          (int) stats[3], (int) stats[4], stats[5], stats[6], logprobs);
  }
}
