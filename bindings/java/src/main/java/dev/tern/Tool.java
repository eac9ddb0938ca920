package dev.tern;

/**
 * A function the model may call: name (1 to 64 of a-z, A-Z, 0-9, _ and -), description
 * (may be null) and the JSON Schema text of its arguments (null: any object). The call's
 * arguments are constrained to the schema (see tern.h's "Chat completions").
 */
public record Tool(String name, String description, String parameters) {}
