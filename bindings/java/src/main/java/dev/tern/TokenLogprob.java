package dev.tern;

import java.nio.charset.StandardCharsets;

/**
 * A token's log-probability under the distribution sampling drew from (after the logit bias,
 * the grammar, the penalties and the temperature; before top-k, min-p and top-p: OpenAI's
 * definition). bytes may be part of a UTF-8 character; text() decodes them as they are.
 */
public final class TokenLogprob {
  private final int token;
  private final float logprob;
  private final byte[] bytes;

  TokenLogprob(int token, float logprob, byte[] bytes) {
    this.token = token;
    this.logprob = logprob;
    this.bytes = bytes;
  }

  public int token() {
    return token;
  }

  /** Natural log, <= 0. */
  public float logprob() {
    return logprob;
  }

  public byte[] bytes() {
    return bytes.clone();
  }

  /** The bytes as text (a partial character becomes U+FFFD). */
  public String text() {
    return new String(bytes, StandardCharsets.UTF_8);
  }

  @Override
  public String toString() {
    return token + " " + text() + " " + logprob;
  }
}
