package dev.tern;

/**
 * What the reply must be (tern_response_format): any text, any JSON object, JSON valid against
 * a JSON Schema, or a sentence of a GBNF grammar. The JSON and grammar formats need
 * {@link ModelParams#grammarMemory}.
 */
public final class ResponseFormat {
  public static final ResponseFormat TEXT = new ResponseFormat(0, null);
  public static final ResponseFormat JSON_OBJECT = new ResponseFormat(1, null);

  final int kind;  // tern_response_format
  final String text;

  private ResponseFormat(int kind, String text) {
    this.kind = kind;
    this.text = text;
  }

  /** JSON valid against `schema` (JSON Schema text; an unsupported keyword is UNSUPPORTED_SCHEMA). */
  public static ResponseFormat jsonSchema(String schema) {
    return new ResponseFormat(2, schema);
  }

  /** A sentence of the GBNF grammar (root rule "root"); not with tools. */
  public static ResponseFormat grammar(String gbnf) {
    return new ResponseFormat(3, gbnf);
  }

  @Override
  public String toString() {
    return switch (kind) {
      case 0 -> "text";
      case 1 -> "json_object";
      case 2 -> "json_schema";
      default -> "grammar";
    };
  }
}
