package dev.tern;

/** How a session picks tokens: mirrors {@code tern_sampler_params}; setters return this. */
public final class SamplerParams {
  float temperature = 0.8f;
  int topK = 40;
  float topP = 0.95f;
  float minP = 0.05f;
  float repeatPenalty = 1.0f;
  int repeatLastN = 64;
  long seed = 0x7465726eL;
  float presencePenalty = 0.0f;
  float frequencyPenalty = 0.0f;
  String grammar = null;
  String jsonSchema = null;

  SamplerParams copy() {
    final SamplerParams c = new SamplerParams();
    c.temperature = temperature;
    c.topK = topK;
    c.topP = topP;
    c.minP = minP;
    c.repeatPenalty = repeatPenalty;
    c.repeatLastN = repeatLastN;
    c.seed = seed;
    c.presencePenalty = presencePenalty;
    c.frequencyPenalty = frequencyPenalty;
    c.grammar = grammar;
    c.jsonSchema = jsonSchema;
    return c;
  }

  /** 0: greedy. */
  public SamplerParams temperature(float t) {
    this.temperature = t;
    return this;
  }

  public SamplerParams topK(int k) {
    this.topK = k;
    return this;
  }

  public SamplerParams topP(float p) {
    this.topP = p;
    return this;
  }

  public SamplerParams minP(float p) {
    this.minP = p;
    return this;
  }

  public SamplerParams repeatPenalty(float penalty, int lastN) {
    this.repeatPenalty = penalty;
    this.repeatLastN = lastN;
    return this;
  }

  public SamplerParams seed(long seed) {
    this.seed = seed;
    return this;
  }

  public SamplerParams presencePenalty(float p) {
    this.presencePenalty = p;
    return this;
  }

  public SamplerParams frequencyPenalty(float p) {
    this.frequencyPenalty = p;
    return this;
  }

  /**
   * Constrains the output to a GBNF grammar (root rule "root"; see tern.h's structured
   * output section): only tokens that keep it a prefix of a sentence are sampled, and the
   * end only where it is whole. The model needs {@link ModelParams#grammarMemory}. Null: none.
   * Replaces {@link #jsonSchema}.
   */
  public SamplerParams grammar(String gbnf) {
    this.grammar = gbnf;
    this.jsonSchema = null;
    return this;
  }

  /**
   * Constrains the output to JSON valid against a JSON Schema (converted with
   * {@link Tern#jsonSchemaToGrammar}; an unsupported keyword is an UNSUPPORTED_SCHEMA error
   * naming it). Null: none. Replaces {@link #grammar}.
   */
  public SamplerParams jsonSchema(String schema) {
    this.jsonSchema = schema;
    this.grammar = null;
    return this;
  }
}
