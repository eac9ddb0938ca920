package dev.tern;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A strict JSON reader for the tests (RFC 8259: objects, arrays, strings with escapes, numbers,
 * true/false/null; nothing after the value): Map, List, String, Double, Boolean or null.
 * Throws IllegalArgumentException on anything else.
 */
final class Json {
  private static final Pattern NUMBER = Pattern.compile("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
  private final String s;
  private int i;

  private Json(String s) {
    this.s = s;
  }

  static Object parse(String text) {
    final Json j = new Json(text);
    final Object v = j.value();
    j.space();
    if (j.i != text.length()) throw j.error("text after the value");
    return v;
  }

  private IllegalArgumentException error(String what) {
    return new IllegalArgumentException(what + " at " + i + " in " + s);
  }

  private void space() {
    while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) ++i;
  }

  private void expect(char c) {
    space();
    if (i >= s.length() || s.charAt(i) != c) throw error("expected '" + c + "'");
    ++i;
  }

  private boolean peek(char c) {
    space();
    return i < s.length() && s.charAt(i) == c;
  }

  private Object value() {
    space();
    if (i >= s.length()) throw error("expected a value");
    final char c = s.charAt(i);
    if (c == '{') {
      final Map<String, Object> m = new LinkedHashMap<>();
      ++i;
      if (peek('}')) {
        ++i;
        return m;
      }
      while (true) {
        space();
        final String key = string();
        expect(':');
        if (m.put(key, value()) != null) throw error("key twice");
        if (!peek(',')) break;
        ++i;
      }
      expect('}');
      return m;
    }
    if (c == '[') {
      final List<Object> a = new ArrayList<>();
      ++i;
      if (peek(']')) {
        ++i;
        return a;
      }
      while (true) {
        a.add(value());
        if (!peek(',')) break;
        ++i;
      }
      expect(']');
      return a;
    }
    if (c == '"') return string();
    for (String word : new String[] {"true", "false", "null"}) {
      if (s.startsWith(word, i)) {
        i += word.length();
        return word.equals("null") ? null : Boolean.valueOf(word);
      }
    }
    final Matcher n = NUMBER.matcher(s).region(i, s.length());
    if (!n.lookingAt()) throw error("expected a value");
    i = n.end();
    return Double.valueOf(n.group());
  }

  private String string() {
    if (i >= s.length() || s.charAt(i) != '"') throw error("expected a string");
    final StringBuilder b = new StringBuilder();
    for (++i; i < s.length(); ++i) {
      final char c = s.charAt(i);
      if (c == '"') {
        ++i;
        return b.toString();
      }
      if (c < 0x20) throw error("a control character in a string");
      if (c != '\\') {
        b.append(c);
        continue;
      }
      if (++i >= s.length()) break;
      final char e = s.charAt(i);
      final int at = "\"\\/bfnrt".indexOf(e);
      if (at >= 0) {
        b.append("\"\\/\b\f\n\r\t".charAt(at));
      } else if (e == 'u' && i + 4 < s.length()) {
        b.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
        i += 4;
      } else {
        throw error("a bad escape");
      }
    }
    throw error("an unterminated string");
  }
}
