package dev.tern;

/** Whether the reply may, must or must not call a tool (tern_tool_choice). */
public final class ToolChoice {
  /** A call or a reply, as the model decides. */
  public static final ToolChoice AUTO = new ToolChoice(0, null);
  /** The tools are not shown. */
  public static final ToolChoice NONE = new ToolChoice(1, null);
  /** A call of one of the tools. */
  public static final ToolChoice REQUIRED = new ToolChoice(2, null);

  final int kind;  // tern_tool_choice
  final String name;

  private ToolChoice(int kind, String name) {
    this.kind = kind;
    this.name = name;
  }

  /** A call of the named tool. */
  public static ToolChoice function(String name) {
    return new ToolChoice(3, name);
  }

  @Override
  public String toString() {
    return switch (kind) {
      case 0 -> "auto";
      case 1 -> "none";
      case 2 -> "required";
      default -> "function " + name;
    };
  }
}
