import sys,re
# Prints the shortest loop (label .. branch back to it) whose body has exactly N multiply
# ops (smull/smlal/sdot): with one token that is the per-64-byte-tile inner loop. An
# optional third argument replaces the counted mnemonics (a regex, e.g. 'tbl'); an optional
# fourth restricts the search to functions whose symbol matches a regex. N = 0 takes, among
# the innermost loops (no backward branch inside), the one with the most of them and prints
# that number to stderr (for loops whose unrolling depends on the compiler: mca_peers.sh
# divides by it; the main loop beats its remainder loop).
path, want = sys.argv[1], int(sys.argv[2])
ops = sys.argv[3] if len(sys.argv) > 3 else 'smull|smlal|sdot'
func = sys.argv[4] if len(sys.argv) > 4 else None
lines=open(path).read().split('\n')
# The function each line belongs to (its last symbol label), when a filter is given.
owner=[None]*len(lines)
current=None
for i,l in enumerate(lines):
    m=re.match(r'^([A-Za-z_][\w.$]*):',l)
    if m and not m.group(1).startswith('.L'): current=m.group(1)
    owner[i]=current
labels={}
for i,l in enumerate(lines):
    m=re.match(r'^(\.L\w+):',l)
    if m: labels[m.group(1)]=i
branch=re.compile(r'^\s+(?:b\.?\w*|cbn?z\s+\w+,|tbn?z\s+\w+,\s*#?\w+,)\s*(\.L\w+)$')
back=[]  # (branch line, label line) of every backward branch
for i,l in enumerate(lines):
    m=branch.search(l)
    if m and m.group(1) in labels and labels[m.group(1)]<i: back.append((i,labels[m.group(1)]))
best=None
for i,start in back:
    if func and not (owner[i] and re.search(func, owner[i])): continue
    body=[b for b in lines[start+1:i+1] if b.startswith('\t') and not b.strip().startswith(('.','//'))]
    n=sum(1 for b in body if re.match(r'\s*(%s)' % ops,b))
    if want==0:
        innermost=not any(start<j<i for j,_ in back)
        if innermost and n>0 and (best is None or n>best[1]): best=(body,n)
    elif n==want and (best is None or len(body)<len(best[0])): best=(body,n)
if best is None: sys.exit(1)
if want==0: print(best[1], file=sys.stderr)
print('\n'.join(best[0]))
