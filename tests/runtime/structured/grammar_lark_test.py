#!/usr/bin/env python3
"""Tern's grammar engine against an independent parser: Lark (Debian's python3-lark).

Each case is one grammar written twice, in GBNF for Tern and by hand in Lark's syntax, with a
few sentences of it. The texts tried are those sentences, mutations of them (a character
deleted, inserted, replaced or doubled, a cut) and random strings over the grammar's
characters; Lark's Earley parser (no lexer: one terminal per character) says which are
sentences, and tern-grammar-check must agree on every one. Bad grammars must be refused
with INVALID_GRAMMAR and a message naming the place or the rule.

  grammar_lark_test.py --check TERN_GRAMMAR_CHECK [--emulator=QEMU,ARG,...]
Fails (never skips) when lark is missing: .ci/deps installs python3-lark.
"""
import argparse
import json
import random
import sys

import jsonl_tool

try:
    import lark
except ImportError:
    print("FAILED: python3-lark is not installed (.ci/deps installs it)")
    sys.exit(1)

# (name, GBNF, Lark, sentences, extra characters for random strings)
CASES = [
    ("arithmetic",
     r'''
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
''',
     r'''
root: expr
expr: term (("+" | "-") term)*
term: factor (("*" | "/") factor)*
factor: DIGIT+ | "(" expr ")" | "-" factor
DIGIT: /[0-9]/
''',
     ["1", "12+3", "(1+2)*3", "-4/(5-6)", "((7))", "1*2*3-4+5", "--3"], "0123456789+-*/()"),
    ("repetition counts",
     r'''
root ::= "a"{2,4} "b"{3} ("c" "d"?){0,2} "e"{1,}
''',
     r'''
root: "a"~2..4 "b"~3 ("c" ["d"])~0..2 E+
E: "e"
''',
     ["aabbbe", "aaaabbbcdcee", "aaabbbcceee", "aabbbcde"], "abcde"),
    ("counted repetitions (above 16: a count in the parse state)",
     r'''
root ::= "<" [a-c]{17,20} ">" ( "x" [0-9] ){18,} ( "ab" | "c" ){0,40} ( [a-b]{17,18} "," ){17,19} "!"
''',
     r'''
root: R
R: /<[a-c]{17,20}>(x[0-9]){18,}(ab|c){0,40}([a-b]{17,18},){17,19}!/
''',
     ["<" + "a" * n + ">" + "x1" * m + "ab" * k + ("a" * 17 + ",") * j + "!"
      for n, m, k, j in [(17, 18, 0, 17), (20, 19, 40, 19), (18, 30, 20, 18), (19, 25, 39, 18)]]
     + ["<" + "c" * 18 + ">" + "x9" * 18 + "c" * 40 + ("b" * 18 + ",") * 18 + "!",
        "<" + "c" * 18 + ">" + "x9" * 18 + "cab" * 13 + "c" + ("b" * 17 + ",") * 18 + "!"],
     "abc<>x0,!"),
    ("alternations of literals (folded into a trie: prefixes, duplicates, empty, mixed)",
     r'''
root ::= ( "a" | "ab" | "abc" | "b" | "ba" | "" | "ab" | [x-z] "q" | "é" | "éa" | "abd" ) "!"
''',
     r'''
root: R
R: /(a|ab|abc|b|ba||[x-z]q|é|éa|abd)!/
''',
     ["!", "a!", "ab!", "abc!", "abd!", "b!", "ba!", "xq!", "é!", "éa!"], "abcdxqé!"),
    ("classes and unicode",
     r'''
root ::= ident | [^a-z\n]{2} | "é" [α-ω]+ | [\t\\\]-] "!"
ident ::= [a-zA-Z_] [a-zA-Z0-9_]*
''',
     r'''
root: ident | NOTLOWER~2 | "é" GREEK+ | SPECIAL "!"
ident: IDSTART IDCHAR*
IDSTART: /[a-zA-Z_]/
IDCHAR: /[a-zA-Z0-9_]/
NOTLOWER: /[^a-z\n]/
GREEK: /[α-ω]/
SPECIAL: /[\t\\\]\-]/
''',
     ["x", "_a9", "Z_", "AB", "1é", "éαβω", "\t!", "\\!", "]!", "-!", "東京"],
     "aZ_9é東αω\t\\]-!\n"),
    ("alternation and optional groups",
     r'''
root ::= ("x" | "y" ("z" | ))* "!"
''',
     r'''
root: ("x" | "y" ["z"])* "!"
''',
     ["!", "x!", "yz!", "yyz!", "xyzxy!"], "xyz!"),
    ("nested lists",
     r'''
root ::= list
list ::= "[" ( item ( "," item )* )? "]"
item ::= list | [0-9]
''',
     r'''
root: list
list: "[" [item ("," item)*] "]"
item: list | DIGIT
DIGIT: /[0-9]/
''',
     ["[]", "[1]", "[1,[2,3],[]]", "[[[]]]", "[[1],[2,[3]]]"], "[],0123"),
    ("any character",
     r'''
root ::= "<" .{0,3} ">"
''',
     r'''
root: "<" ANY~0..3 ">"
ANY: /./s
''',
     ["<>", "<a>", "<\n>", "<>>>", "<東é!>"], "<>a\né東"),
    ("escapes",
     r'''
root ::= "\x41\u00e9\n" [\t\\\]]+ "\""
''',
     r'''
root: "Aé\n" CH+ "\""
CH: /[\t\\\]]/
''',
     ["Aé\n\t\"", "Aé\n\\]\t\""], "Aé\n\t\\]\"x"),
    ("ambiguous and nullable",
     r'''
root ::= "a" root "a" | "b" root "b" | "c" | ""
''',
     r'''
root: "a" root "a" | "b" root "b" | "c" | 
''',
     ["", "c", "aa", "abcba", "abba", "bacab"], "abc"),
    ("json",
     None,  # bench/data/json.gbnf (--json-gbnf)
     r'''
root: object
value: object | array | string | number | boolean | null
object: "{" ws [string ":" ws value ("," ws string ":" ws value)*] "}" ws
array: "[" ws [value ("," ws value)*] "]" ws
string: STRING ws
STRING: /"([^"\\\x7F\x00-\x1F]|\\(["\\\/bfnrt]|u([0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}|[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})))*"/
number: NUMBER ws
NUMBER: /-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?([eE][-+]?[0-9]{1,3})?/
boolean: ("true" | "false") ws
null: "null" ws
ws: WS?
WS: / |\n[ \t]{0,20}/
''',
     ['{}', '{"a":1}', '{"a" : [1, -2.5e3, true, null], "b": {"c": "x\\"\\u00e9"}}\n',
      '{\n  "k": "v"}', '{"x":[[],{}]} ', '{"e": "\\ud83d\\ude00"}'], '{}[]":,-.0123456789eEtrufalsn \\ud8'),
]

BAD_GRAMMARS = [
    ('root ::= "a" missing', "never defined", "missing"),
    ('expr ::= "a"', "no 'root' rule", None),
    ('root ::= "a" ( "b"', "without its ')'", "line 1"),
    ('root ::= [a-', "closing ']'", "line 1"),
    ('root ::= "abc', "closing '\"'", "line 1"),
    ('root ::= a\na ::= a "x" | "y"', "left-recursive", "'a'"),
    ('root ::= "x"{3,2}', "maximum is below", "line 1"),
    ('root ::= "x"{99999}', "above 65535", "line 1"),
    ('root ::= "\\q"', "unknown escape", "line 1"),
    ('root ::= "a"\nroot ::= "b"', "defined twice", "line 2"),
    ('root ::= <[42]>', "token references", "line 1"),
    ('root ::= [z-a]', "end comes before its start", "line 1"),
    ('\n\n  root "a"', "expected '::='", "line 3"),
    ('root ::= ' + '(' * 200 + '"a"' + ')' * 200, "nested deeper", "line 1"),
]


def mutations(text, alphabet, rng, count):
    out = set()
    for _ in range(count):
        t = list(text)
        kind = rng.randrange(5)
        i = rng.randrange(len(t) + 1)
        if kind == 0 and t:
            del t[min(i, len(t) - 1)]
        elif kind == 1:
            t.insert(i, rng.choice(alphabet))
        elif kind == 2 and t:
            t[min(i, len(t) - 1)] = rng.choice(alphabet)
        elif kind == 3 and t:
            j = min(i, len(t) - 1)
            t.insert(j, t[j])
        else:
            t = t[:i]
        out.add("".join(t))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", required=True)
    ap.add_argument("--emulator", default="")
    ap.add_argument("--json-gbnf", required=True)
    args = ap.parse_args()
    cmd = [w for w in args.emulator.split(",") if w] + [args.check]
    rng = random.Random(24)
    requests, expected, names = [], [], []
    for name, gbnf, lark_text, sentences, alphabet in CASES:
        if gbnf is None:
            with open(args.json_gbnf, encoding="utf-8") as f:
                gbnf = f.read()
        parser = lark.Lark(lark_text, start="root", parser="earley", lexer="dynamic")
        texts = set(sentences)
        for s in sentences:
            texts |= mutations(s, alphabet, rng, 25)
        for _ in range(40):
            texts.add("".join(rng.choice(alphabet) for _ in range(rng.randrange(8))))
        texts = sorted(texts)
        want = []
        for t in texts:
            try:
                parser.parse(t)
                want.append(True)
            except lark.exceptions.LarkError:
                want.append(False)
        for s in sentences:
            if not want[texts.index(s)]:
                print(f"FAILED: case {name}: Lark rejects the sentence {s!r} (the Lark grammar is wrong)")
                sys.exit(1)
        requests.append({"grammar": gbnf, "texts": texts})
        expected.append((texts, want))
        names.append(name)
    for text, _, _ in BAD_GRAMMARS:
        requests.append({"grammar": text, "texts": []})
    answers = jsonl_tool.ask(cmd, requests)
    failures, total, accepted = 0, 0, 0
    for name, (texts, want), answer in zip(names, expected, answers):
        if not answer["ok"]:
            print(f"FAILED: case {name}: Tern refuses the grammar: {answer['error']}")
            failures += 1
            continue
        for t, w, got in zip(texts, want, answer["accepted"]):
            total += 1
            accepted += w
            if w != got:
                failures += 1
                print(f"MISMATCH {name}: {t!r}: Lark {'accepts' if w else 'rejects'}, Tern "
                      f"{'accepts' if got else 'rejects'}")
        print(f"{name}: {len(texts)} texts, {sum(want)} sentences")
    for (text, message, where), answer in zip(BAD_GRAMMARS, answers[len(CASES):]):
        ok = (not answer["ok"] and answer["status"] == "INVALID_GRAMMAR" and message in answer["error"] and
              (where is None or where in answer["error"]))
        if not ok:
            failures += 1
            print(f"FAILED: bad grammar {text[:40]!r}: expected INVALID_GRAMMAR with {message!r}"
                  f"{' and ' + repr(where) if where else ''}, got {answer}")
    print(f"{total} texts ({accepted} sentences, {total - accepted} not), {len(BAD_GRAMMARS)} bad grammars: "
          f"{failures} failure(s)")
    if accepted == 0 or accepted == total:
        print("FAILED: the texts must include sentences and non-sentences")
        sys.exit(1)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
