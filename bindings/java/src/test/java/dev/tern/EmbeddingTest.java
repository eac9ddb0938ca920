package dev.tern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Model.embed on the embedding tests' Gemma3 bundle (tern.embedding.dir, made by the
 * embedding_make_models fixture) against the independent float64 reference (reference.jsonl):
 * cosine >= 0.999 per text, unit length, dimensions, and the errors a Java caller gets.
 */
class EmbeddingTest {
  static final String DIR = System.getProperty("tern.embedding.dir", "");

  record Case(String text, double[] embedding) {}

  // The reference's gemma3 lines without a prompt: "text" and "embedding" of each.
  static List<Case> reference() throws Exception {
    final Path path = Path.of(DIR, "reference.jsonl");
    assertTrue(Files.exists(path), path + " is missing (ctest makes it in embedding_make_models)");
    final Pattern text = Pattern.compile("\"text\": \"((?:[^\"\\\\]|\\\\.)*)\"");
    final Pattern embedding = Pattern.compile("\"embedding\": \\[([^\\]]*)\\]");
    final List<Case> cases = new ArrayList<>();
    for (String line : Files.readAllLines(path, StandardCharsets.UTF_8)) {
      if (!line.contains("\"model\": \"gemma3\"") || !line.contains("\"prompt\": \"\"")) continue;
      final Matcher t = text.matcher(line), e = embedding.matcher(line);
      assertTrue(t.find() && e.find(), line);
      final String[] parts = e.group(1).split(",");
      final double[] v = new double[parts.length];
      for (int i = 0; i < v.length; ++i) v[i] = Double.parseDouble(parts[i].trim());
      cases.add(new Case(unescape(t.group(1)), v));
    }
    return cases;
  }

  static String unescape(String s) {
    final StringBuilder b = new StringBuilder();
    for (int i = 0; i < s.length(); ++i) {
      final char c = s.charAt(i);
      if (c != '\\') {
        b.append(c);
        continue;
      }
      final char n = s.charAt(++i);
      switch (n) {
        case 'n' -> b.append('\n');
        case 't' -> b.append('\t');
        case 'r' -> b.append('\r');
        case 'u' -> {
          b.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
          i += 4;
        }
        default -> b.append(n);
      }
    }
    return b.toString();
  }

  static double cosine(float[] a, double[] b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; ++i) {
      ab += a[i] * b[i];
      aa += (double) a[i] * a[i];
      bb += b[i] * b[i];
    }
    return ab / Math.sqrt(aa * bb);
  }

  @Test
  void embedMatchesTheReference() throws Exception {
    final List<Case> cases = reference();
    assertTrue(cases.size() >= 15);
    try (Model model = Model.load(Path.of(DIR, "gemma3.tern").toString(), new ModelParams())) {
      assertEquals(64, model.embeddingDimensions());
      final String[] texts = cases.stream().map(Case::text).toArray(String[]::new);
      final float[][] v = model.embed(texts);
      assertEquals(texts.length, v.length);
      for (int i = 0; i < texts.length; ++i) {
        assertTrue(cosine(v[i], cases.get(i).embedding(), 64) >= 0.999, "text " + i + ": " + texts[i]);
        double norm = 0;
        for (float x : v[i]) norm += x * x;
        assertEquals(1.0, norm, 1e-5);
      }
      final float[][] cut = model.embed(new String[] {texts[0]}, 16, "", null, false);
      assertEquals(16, cut[0].length);
      final TernException e = assertThrows(TernException.class, () -> model.embed(new String[] {"x"}, 0, "passage", null, false));
      assertEquals("INVALID_ARGUMENT", e.statusName());
      assertThrows(TernException.class, () -> model.embed((String) null));
    }
  }

  @Test
  void aGenerativeModelHasNoEmbeddings() throws Exception {
    try (Model model = Model.load(BindingTest.BUNDLE, new ModelParams())) {
      assertEquals(0, model.embeddingDimensions());
      final TernException e = assertThrows(TernException.class, () -> model.embed("x"));
      assertEquals("NOT_SUPPORTED", e.statusName());
    }
  }
}
