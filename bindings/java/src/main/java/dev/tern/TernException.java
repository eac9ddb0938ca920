package dev.tern;

/**
 * A failure reported by the runtime: the {@code tern_status} code, its name and the message
 * saying what went wrong (the same as {@code tern_last_error_message()} in C).
 */
public class TernException extends Exception {
  private static final long serialVersionUID = 1L;
  private final int status;
  private final String statusName;

  public TernException(int status, String statusName, String message) {
    super(statusName + ": " + message);
    this.status = status;
    this.statusName = statusName;
  }

  /** The numeric tern_status (include/tern_error_codes.h). */
  public int status() {
    return status;
  }

  /** The status name: "BUDGET_TOO_SMALL", "INVALID_UTF8", "ABORTED", ... */
  public String statusName() {
    return statusName;
  }
}
