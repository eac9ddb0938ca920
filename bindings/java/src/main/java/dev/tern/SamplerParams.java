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
}
