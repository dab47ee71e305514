"""A `.tc` program of N `let`s mixing matmuls, row max/sum normalizations and pointwise ops over
f32[64, 64], each reading the previous value and one a few steps back (seeded by N): the programs
of the explain/compile-time table in BENCHMARKS.md. Usage: python3 bench/let_chain.py N > chain.tc"""
import sys, random
n=int(sys.argv[1]); random.seed(n)
lines=["fn big(x: f32[64, 64], w: f32[64, 64], b: f32[64]) -> f32[64, 64] {", "    let v0 = x;"]
k=0
for i in range(1,n+1):
    r=random.random(); p=f"v{i-1}"; q=f"v{random.randint(max(0,i-8),i-1)}"
    if r<0.1: e=f"{p} @ w"
    elif r<0.2: e=f"{p} - {p}.max(-1, keepdim)"
    elif r<0.3: e=f"{p} / ({p}.sum(-1, keepdim) + 1.0)"
    elif r<0.5: e=f"tanh({p}) + {q}"
    elif r<0.7: e=f"{p} * 0.5 + b"
    elif r<0.85: e=f"relu({p}) - {q}"
    else: e=f"sigmoid({p}) * {q}"
    lines.append(f"    let v{i} = {e};")
lines.append(f"    v{n}"); lines.append("}")
print("\n".join(lines))
