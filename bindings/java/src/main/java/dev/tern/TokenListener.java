package dev.tern;

/** Receives generated text as it comes (whole characters). Return false to stop. */
@FunctionalInterface
public interface TokenListener {
  boolean onText(String piece);
}
