#!/usr/bin/env python3
"""Cuts a decode loop out of an AArch64 assembly file (GCC's or clang's) for llvm-mca.

    extract_loop.py ASM FUNC [OPS]

FUNC is a regex on the symbols of the functions to search (Tern keeps each one-token loop in
a function of its own: block_t2i16_smull_1, block_t2i16_sdot_1, block_n<..., 1>); OPS is a
regex on the mnemonics that count as multiplies (default: SMULL/SMLAL(2), SDOT). The loops
are the natural loops of the functions' control-flow graphs (basic blocks split at labels and
branches; an edge to a block that dominates its source closes a loop); among those holding
no other loop, the one with the most counted vector instructions (then the fewest
instructions) is printed, its blocks in text order, instructions only. Every loop is cut the
same way whatever the compiler unrolled: the loop as compiled, with all it does per
iteration (a loop of several blocks is timed as if all of them ran every iteration).

stderr gets "OPS PRODUCTS": how many counted instructions the loop runs per iteration and
how many 8-bit products they make (SMULL/SMLAL(2): one per 16-bit lane of the destination;
SDOT/UDOT: 4 per 32-bit lane; MUL/MLA: one per lane; TBL: one lookup per byte). With one
token, each product is one weight, so cycles per iteration / PRODUCTS = cycles per weight.
Exit status 1 if no loop matches.

Picking, in the whole file, the shortest text between a label and a backward branch to it
with a given multiply count (what this tool did before) took, in clang's output, a loop of
the two-token kernel that also had 8 multiplies; a symbol cannot be mistaken, and a text
range can hold a loop's exit path while its body sits elsewhere, a natural loop cannot.
"""
import re
import sys

LANES = {'16b': 16, '8b': 8, '8h': 8, '4h': 4, '4s': 4, '2s': 2, '2d': 2}


def products(mnemonic, operands):
    """8-bit products of one counted instruction, from its destination's arrangement."""
    m = re.match(r'\s*\{?\s*v\d+\.(\w+)', operands)
    if not m or m.group(1) not in LANES:
        return 0
    lanes = LANES[m.group(1)]
    if re.fullmatch(r'[su]dot|usdot|sudot', mnemonic):
        return 4 * lanes
    return lanes


COND = r'b\.?(?:eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)|cbn?z|tbn?z'


def functions(lines, func):
    """(name, [(label or None, instruction or None)]) of each function whose symbol matches."""
    out, current = [], None
    for line in lines:
        m = re.match(r'^([A-Za-z_$][\w.$]*):', line)
        if m:
            current = (m.group(1), []) if re.search(func, m.group(1)) else None
            if current:
                out.append(current)
            continue
        if current is None:
            continue
        m = re.match(r'^(\.L\w+):', line)
        if m:
            current[1].append((m.group(1), None))
            continue
        ins = line.split('//')[0].rstrip()
        if ins.startswith('\t') and ins.strip() and not ins.strip().startswith('.'):
            current[1].append((None, ins))
    return out


def loops(items):
    """The innermost natural loops of one function: (instructions in text order)."""
    # Basic blocks: a label or the instruction after a branch starts one.
    blocks, label_block = [], {}
    for label, ins in items:
        if label is not None:
            if not blocks or blocks[-1]['ins']:
                blocks.append({'ins': []})
            label_block[label] = len(blocks) - 1
            continue
        if not blocks or blocks[-1].get('ends'):
            blocks.append({'ins': []})
        blocks[-1]['ins'].append(ins)
        op = ins.split()[0]
        if op in ('b', 'br', 'ret') or re.fullmatch(COND, op):
            blocks[-1]['ends'] = True
    succ = []
    for i, b in enumerate(blocks):
        last = b['ins'][-1].split(None, 1) if b['ins'] else ['']
        op, target = last[0], last[1].split(',')[-1].strip() if len(last) > 1 else ''
        nxt = [i + 1] if i + 1 < len(blocks) else []
        if op in ('br', 'ret'):
            succ.append([])
        elif op == 'b':
            succ.append([label_block[target]] if target in label_block else [])
        elif re.fullmatch(COND, op):
            succ.append(([label_block[target]] if target in label_block else []) + nxt)
        else:
            succ.append(nxt)
    n = len(blocks)
    pred = [[] for _ in range(n)]
    for i, ss in enumerate(succ):
        for j in ss:
            pred[j].append(i)
    # Dominators (iterative; a function's blocks are few).
    dom = [set(range(n)) for _ in range(n)]
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for i in range(1, n):
            ps = [dom[p] for p in pred[i]]
            d = (set.intersection(*ps) if ps else set()) | {i}
            if d != dom[i]:
                dom[i], changed = d, True
    # Natural loops, merged per header: the header and what reaches a back edge's source
    # without passing through the header.
    body = {}
    for u in range(n):
        for h in succ[u]:
            if h in dom[u]:
                seen, stack = {h, u}, [u] if u != h else []
                while stack:
                    for p in pred[stack.pop()]:
                        if p not in seen:
                            seen.add(p)
                            stack.append(p)
                body.setdefault(h, set()).update(seen)
    for h, blks in body.items():
        if any(h2 != h and h2 in blks for h2 in body):
            continue  # holds another loop
        yield [ins for i in sorted(blks) for ins in blocks[i]['ins']]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, func = sys.argv[1], sys.argv[2]
    ops = sys.argv[3] if len(sys.argv) > 3 else r'smull2?|smlal2?|sdot'
    lines = open(path).read().split('\n')
    best = None
    for _, items in functions(lines, func):
        for body in loops(items):
            count = prod = 0
            for ins in body:
                parts = ins.strip().split(None, 1)
                if len(parts) == 2 and re.fullmatch(ops, parts[0]):
                    p = products(parts[0], parts[1])
                    if p:
                        count += 1
                        prod += p
            if count and (best is None or (count, -len(body)) > (best[1], -len(best[0]))):
                best = (body, count, prod)
    if best is None:
        sys.exit(1)
    print(best[1], best[2], file=sys.stderr)
    print('\n'.join(best[0]))


main()
