# Python mirror of hopper_tf32.cu plan() for 1xTF32 NT (not transposing): the best cooperative plan's
# modelled us against unsplit ping-pong's.
import sys
SMS=132
COST={256:(0.68,6.4),192:(0.55,6.0),128:(0.50,5.0)}
def cheapest(tiles,kb,outputs,kbu,wu,maxs=8):
    best=None
    for s in range(1,maxs+1):
        if s>1 and (kb<s*8 or s*outputs>(1<<24)): break
        per=-(-kb//s); used=-(-kb//per); waves=-(-tiles*used//SMS)
        us=waves*per*kbu+waves*wu
        if used>1: us+=used*outputs*8/2.5e6+4
        if s==1 or us<best[1]: best=(used,us)
    return best
def plan(b,m,n,k):
    kt=-(-k//32); tp=-(-m//128); outputs=b*m*n
    best=None
    for bq in (256,192,128):
        if bq>128 and not n>128: continue
        tq=-(-n//bq); tiles=b*tp*tq
        s,us=cheapest(tiles,kt,outputs,*COST[bq])
        if best is None or us<best[2]: best=(bq,s,us)
    tq=-(-n//128); tiles=b*tp*tq; waves=-(-tiles//SMS)
    pp=waves*kt*0.40+waves*0.15
    return best,pp,kt
for line in sys.argv[1:]:
    b,m,n,k=map(int,line.split(','))
    best,pp,kt=plan(max(b,1),m,n,k)
    print(f"{b}x{m}x{n}x{k}: best {best[0]} split {best[1]} {best[2]:.1f}us  pp {pp:.1f}us ratio {pp/best[2]:.3f} kt {kt}")

def grid_rows():
    import json,re
    rec={c['name']:c for c in json.load(open('benchmarks/results/nvidia-h200.json'))['cases']}
    out=[]
    for n in open('benchmarks/experiments/tf32_nt_rows.txt'):
        n=n.strip()
        if not n: continue
        d=dict(re.findall(r'(\w)=(\d+|-)',n)); b,m,nn,k=(int(d[x]) if d[x]!='-' else 1 for x in 'BMNK')
        out.append((n,max(b,1),m,nn,k,rec[n]))
    return out
