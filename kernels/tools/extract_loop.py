import sys,re
# Prints the shortest loop (label .. branch back to it) whose body has exactly N multiply
# ops (smull/smlal/sdot): with one token that is the per-64-byte-tile inner loop. An
# optional third argument replaces the counted mnemonics (a regex, e.g. 'tbl').
path, want = sys.argv[1], int(sys.argv[2])
ops = sys.argv[3] if len(sys.argv) > 3 else 'smull|smlal|sdot'
lines=open(path).read().split('\n')
labels={}
for i,l in enumerate(lines):
    m=re.match(r'^(\.L\w+):',l)
    if m: labels[m.group(1)]=i
best=None
for i,l in enumerate(lines):
    m=re.search(r'^\s+(?:b\.?\w*|cbn?z\s+\w+,)\s*(\.L\w+)$',l)
    if m and m.group(1) in labels and labels[m.group(1)]<i:
        body=[b for b in lines[labels[m.group(1)]+1:i+1] if b.startswith('\t') and not b.strip().startswith(('.','//'))]
        n=sum(1 for b in body if re.match(r'\s*(%s)' % ops,b))
        if n==want and (best is None or len(body)<len(best)): best=body
if best is None: sys.exit(1)
print('\n'.join(best))
