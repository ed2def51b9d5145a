#!/usr/bin/env python3
"""A learned ranker over both lists, tried against `query`'s hand-set share (stop 44; not
adopted). Logistic models, pointwise and pairwise (Newton's method, numpy only), over each
candidate's ranks, min-max-normalised scores, calibrated logits and their interactions with
the share's features, fitted on four tldr sets and scored on the fifth (each in turn), on the
feature dumps of `fusion_grid.py`:

    python3 eval/learned_ranker.py DUMPS

Prints the smallest margin over the better single mode (Hit@3, nDCG@10) with each set held
out, and with all five fitted. eval/README.md ("Hybrid against its better half") has the
figures.
"""
import math, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).parent))
import fit_calibration as fc
DUMPS = Path(sys.argv[1] if len(sys.argv) > 1 else '/tmp/f')
K, V = fc.DOCUMENTS_KEYWORD, fc.DOCUMENTS_VECTOR
names = ['tldr-en','tldr-en-desc','tldr-zh','tldr-zh-desc','zh-hard','qmd-queries','qmd-deep-research']
tldr = names[:5]
sig = lambda x: 1/(1+np.exp(-x))
data = {}
for n in names:
    qs = []
    for q, c in fc.grouped(str(DUMPS / f'{n}.jsonl')):
        kn, vn = fc.minmax(c, 'keyword', 'bm25'), fc.minmax(c, 'vector', 'similarity')
        pk = np.array([float(np.dot(K, fc.kw_x(r['keyword']))) if r['keyword'] else -8.0 for r in c])
        pv = np.array([float(np.dot(V, fc.vec_x(r['vector']))) if r['vector'] else -8.0 for r in c])
        lk, lv = pk.max(), pv.max()
        top = next((r['keyword'] for r in c if r['keyword'] and r['keyword']['rank'] == 0), None)
        m, cov = (top['margin'], top['coverage']) if top else (0.0, 0.0)
        rel = np.array([bool(r['relevant']) for r in c])
        judged = next((r['judged'] for r in c if 'judged' in r), None) or max(int(rel.sum()), 1)
        kr = np.array([r['keyword']['rank'] if r['keyword'] else 100 for r in c], float)
        vr = np.array([r['vector']['rank'] if r['vector'] else 100 for r in c], float)
        kc = np.array([r['keyword']['coverage'] if r['keyword'] else 0 for r in c])
        s = sig(1.5 + 0.5*(lv-lk) - 2*m - 4*cov)  # the share before stop 44
        cur = (1-s)*kn + s*vn
        d = vn - kn
        X = np.stack([np.ones_like(kn), kn, vn, np.log1p(kr), np.log1p(vr), kc,
                      pk.clip(-8), pv.clip(-8),
                      d*(lv-lk), d*cov, d*m, d, (kr==100).astype(float), (vr==100).astype(float),
                      cur], 1)
        qs.append(dict(X=X, rel=rel, judged=judged, kr=kr, vr=vr, cur=cur))
    data[n] = qs
metrics = fc.hit3_ndcg10
def ev(n, scorer):
    h = d = 0
    for q in data[n]:
        o = np.argsort(-scorer(q), kind='stable'); a, b = metrics(q['rel'][o], q['judged']); h += a; d += b
    return h/len(data[n]), d/len(data[n])
S = {n: ev(n, lambda q: -q['kr']) for n in names}
Vs = {n: ev(n, lambda q: -q['vr']) for n in names}
C = {n: ev(n, lambda q: q['cur']) for n in names}
def fit(train, cols, l2=1.0, pairwise=False):
    if pairwise:
        Xs, ys = [], []
        for n in train:
            w = 1/len(data[n])
            for q in data[n]:
                X = q['X'][:, cols]; r = q['rel']
                P, N = np.where(r)[0], np.where(~r)[0]
                # negatives: top-20 by either list
                N = N[(np.minimum(q['kr'][N], q['vr'][N]) < 20)]
                if len(P)==0 or len(N)==0: continue
                diff = (X[P][:,None,:]-X[N][None,:,:]).reshape(-1, X.shape[1])
                Xs.append(diff); ys.append(np.full(len(diff), w/len(diff)))
        X = np.concatenate(Xs); wt = np.concatenate(ys); y = np.ones(len(X))
        # symmetric
        X = np.concatenate([X, -X]); y = np.concatenate([y, 0*y]); wt = np.concatenate([wt, wt])
    else:
        Xs, ys, ws = [], [], []
        for n in train:
            for q in data[n]:
                Xs.append(q['X'][:, cols]); ys.append(q['rel'].astype(float)); ws.append(np.full(len(q['rel']), 1/len(data[n])/len(q['rel'])))
        X = np.concatenate(Xs); y = np.concatenate(ys); wt = np.concatenate(ws)
    wt = wt/wt.sum()
    b = np.zeros(X.shape[1])
    for _ in range(50):
        p = sig(X@b); g = X.T@(wt*(p-y)) + l2*1e-3*b
        H = (X*(wt*p*(1-p))[:,None]).T@X + l2*1e-3*np.eye(len(b))
        b -= np.linalg.solve(H, g)
    return b
def report(label, cols, pairwise, l2=1.0):
    res = {}
    for held in tldr:
        b = fit([t for t in tldr if t != held], cols, l2, pairwise)
        res[held] = ev(held, lambda q: q['X'][:, cols]@b)
    ball = fit(tldr, cols, l2, pairwise)
    for n in names[5:]: res[n] = ev(n, lambda q: q['X'][:, cols]@ball)
    fitall = {n: ev(n, lambda q: q['X'][:, cols]@ball) for n in tldr}
    mh = min(res[n][0]-max(S[n][0],Vs[n][0]) for n in tldr); md = min(res[n][1]-max(S[n][1],Vs[n][1]) for n in tldr)
    fh = min(fitall[n][0]-max(S[n][0],Vs[n][0]) for n in tldr); fd = min(fitall[n][1]-max(S[n][1],Vs[n][1]) for n in tldr)
    print(f'{label:40} LOSO min margins H3 {mh:+.3f} nDCG {md:+.3f} | fit-all {fh:+.3f} {fd:+.3f}')
    return res, ball, fitall
print('the share before stop 44: min margins', min(C[n][0]-max(S[n][0],Vs[n][0]) for n in tldr), min(C[n][1]-max(S[n][1],Vs[n][1]) for n in tldr))
feat = ['1','kn','vn','lkr','lvr','kc','pk','pv','d*dl','d*cov','d*m','d','kabs','vabs','cur']
for label, cols in [('ranks+norms',[0,1,2,3,4,12,13]),('+probs',[0,1,2,3,4,6,7,12,13]),('+interactions',[0,1,2,3,4,6,7,8,9,10,11,12,13]),('all',list(range(15))),('cur+ranks',[0,3,4,14,12,13]), ('cur+probs',[0,6,7,14])]:
    for pw in [False, True]:
        res, b, fa = report(label+(' pair' if pw else ''), cols, pw)
        if label in ('all','+interactions'):
            for n in names: print(f'    {n:18} S {S[n][0]:.3f}/{S[n][1]:.3f} V {Vs[n][0]:.3f}/{Vs[n][1]:.3f} cur {C[n][0]:.3f}/{C[n][1]:.3f} new {res[n][0]:.3f}/{res[n][1]:.3f}' + (f' fitall {fa[n][0]:.3f}/{fa[n][1]:.3f}' if n in fa else ''))
