#!/usr/bin/env python3
"""Writes the generated schemas of the grammar compile benchmark (bench/grammar_compile_peers.sh)
and a valid instance of each, into this folder:

  long-string-2000.json     {"text": string, maxLength 2000}; instance: 1,990 characters of prose
  long-string-65535.json    the same with maxLength 65535; instance: 8,000 characters of prose
  enum-1000.json            {"city": one of 1,000 made-up names}; instance: the 700th name
  enum-10000.json           the same with 10,000 names; instance: the 7,000th name

The prose is the start of tests/data/corpus/austen-head.txt (public domain) with its line
breaks made spaces. The names are pseudo-words of two to four syllables from a fixed
generator, so they share prefixes the way real names do. Instances are written with
Python's default separators (", " and ": "). Run from anywhere; the output is deterministic.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "tests", "data", "corpus", "austen-head.txt")
SYLLABLES = ["ka", "lo", "mi", "ra", "ten", "bur", "vel", "sa", "do", "ne", "quin", "har", "pe", "to", "lis",
             "gor", "an", "mo", "ri", "shen", "el", "ba", "wick", "ford", "ton", "ster", "ly", "ham", "ve", "nor"]


def names(count):
    out, seen, state = [], set(), 2026
    while len(out) < count:
        parts = []
        state = (state * 1103515245 + 12345) % 2**31
        for _ in range(2 + state % 3):
            state = (state * 1103515245 + 12345) % 2**31
            parts.append(SYLLABLES[(state >> 8) % len(SYLLABLES)])
        name = "".join(parts).capitalize()
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


def prose(chars):
    with open(CORPUS, encoding="utf-8") as f:
        text = " ".join(f.read().split())
    return text[:chars].rstrip()


def write(name, value):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)
        f.write("\n")


def main():
    for max_length, chars in ((2000, 1990), (65535, 8000)):
        write(f"long-string-{max_length}.json",
              {"type": "object", "properties": {"text": {"type": "string", "maxLength": max_length}},
               "required": ["text"], "additionalProperties": False})
        write(f"long-string-{max_length}.instance.json", {"text": prose(chars)})
    for count in (1000, 10000):
        values = names(count)
        write(f"enum-{count}.json",
              {"type": "object", "properties": {"city": {"enum": values}}, "required": ["city"],
               "additionalProperties": False})
        write(f"enum-{count}.instance.json", {"city": values[count * 7 // 10]})


if __name__ == "__main__":
    main()
