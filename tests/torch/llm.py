# llm.py: what LLM users run, for `make bench-torch` and the GPU suite. A
# GPT-2-medium-sized model (24 layers, 1024 wide, 16 heads, GPT-2's
# vocabulary) with random weights, in fp16 or bf16, built on the GPU from a
# fixed seed, so a run through Cicada can be compared with a native run.
#
#   python3 llm.py decode DTYPE BATCH NEW [ROUNDS]   greedy decode of NEW
#       tokens after a 16-token prompt; prints "decode-DTYPE-bBATCH
#       TOKENS_PER_S" (the median of ROUNDS timed calls after a warm-up),
#       "ttft-DTYPE-bBATCH SECONDS" (time to first token: one new token),
#       "first-call-DTYPE-bBATCH SECONDS" (the first, untimed-for-rate call,
#       which loads and compiles kernels) and "digest-DTYPE-bBATCH HEX".
#   python3 llm.py prefill DTYPE LEN [ROUNDS]   one forward pass over LEN
#       tokens (batch 1); prints "prefill-DTYPE-LEN TOKENS_PER_S" and a
#       digest of the logits' argmax.
#   python3 llm.py serve DTYPE   a cold model server: imports, builds the
#       model and answers one request; prints "answer HEX" and exits. The
#       bench times it from launch to exit.
#   python3 llm.py template DTYPE GO   the same server made ready to be a
#       template (gpu-template): it builds the model, answers a warm-up
#       request, prints "ready", then waits for the file GO to exist and
#       answers the request as serve does ("answer HEX") and exits. A copy
#       started from a template saved after "ready" answers at once.
#   python3 llm.py suite DTYPE...   for each dtype: decode of 32 tokens at
#       batch 1 and 8, and prefill of 2,048 tokens, in one process (what
#       `make bench-torch` and the GPU suite run).
#   python3 llm.py profile DTYPE BATCH NEW   the decode under PyTorch's
#       profiler: the operators with the most CPU time, on stderr.
# Small models for the stand-in-free CPU suite are not the point here: this
# file needs a GPU, torch and transformers.
import hashlib, os, statistics, sys, time

T0 = time.time()
import torch  # noqa: E402
import transformers  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
LAYERS = int(os.environ.get("LLM_LAYERS", "24"))
WIDTH = int(os.environ.get("LLM_WIDTH", "1024"))


def model(dtype):
    cfg = transformers.GPT2Config(n_layer=LAYERS, n_embd=WIDTH, n_head=WIDTH // 64, vocab_size=50257,
                                  n_positions=4096)
    torch.manual_seed(0)
    attn = os.environ.get("LLM_ATTN")  # eager, sdpa: transformers' attention code
    with torch.device("cuda"):
        m = transformers.GPT2LMHeadModel(cfg, **({"attn_implementation": attn} if attn else {}))
    return m.to(DTYPES[dtype]).eval()


def prompt(batch, length):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 50257, (batch, length), generator=g).cuda()


def digest(t):
    return hashlib.sha256(t.cpu().numpy().tobytes()).hexdigest()[:16]


def generate(m, ids, new):
    with torch.no_grad():
        return m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                          do_sample=False, pad_token_id=0)


def timed(fn, rounds):
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def decode(dtype, batch, new, rounds=3, m=None):
    m, ids = m or model(dtype), prompt(batch, 16)
    first, _ = timed(lambda: generate(m, ids, new), 1)  # kernels loaded, compiled, chosen
    ttft, _ = timed(lambda: generate(m, ids, 1), rounds)
    t, out = timed(lambda: generate(m, ids, new), rounds)
    key = "%s-b%d" % (dtype, batch)
    print("decode-%s %.1f" % (key, batch * new / t))
    print("first-call-%s %.3f" % (key, first))
    print("ttft-%s %.4f" % (key, ttft))
    print("digest-%s %s" % (key, digest(out)), flush=True)


def prefill(dtype, length, rounds=5, m=None):
    m, ids = m or model(dtype), prompt(1, length)
    with torch.no_grad():
        m(ids)
        t, out = timed(lambda: m(ids).logits.argmax(-1), rounds)
    print("prefill-%s-%d %.0f" % (dtype, length, length / t))
    print("digest-prefill-%s-%d %s" % (dtype, length, digest(out)), flush=True)


def serve(dtype):
    m, ids = model(dtype), prompt(1, 16)
    out = generate(m, ids, 8)
    print("answer %s" % digest(out))
    print("serve-seconds %.3f" % (time.time() - T0), flush=True)


def template(dtype, go):
    m, ids = model(dtype), prompt(1, 16)
    generate(m, ids, 8)
    torch.cuda.synchronize()
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    out = generate(m, ids, 8)
    print("answer %s" % digest(out), flush=True)


def suite(dtypes):
    for dtype in dtypes:
        m = model(dtype)
        for batch in (1, 8):
            decode(dtype, batch, 32, 3, m)
        prefill(dtype, 2048, 5, m)
        del m
        torch.cuda.empty_cache()


def profile(dtype, batch, new):
    m, ids = model(dtype), prompt(batch, 16)
    generate(m, ids, 2)
    from torch.profiler import profile as prof, ProfilerActivity
    t0 = time.perf_counter()
    with prof(activities=[ProfilerActivity.CPU]) as p:
        generate(m, ids, new)
        torch.cuda.synchronize()
    print("profiled decode: %.3f s" % (time.perf_counter() - t0), file=sys.stderr)
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=25), file=sys.stderr)


def main(a):
    if a[0] == "decode":
        decode(a[1], int(a[2]), int(a[3]), *map(int, a[4:5]))
    elif a[0] == "prefill":
        prefill(a[1], int(a[2]), *map(int, a[3:4]))
    elif a[0] == "suite":
        suite(a[1:])
    elif a[0] == "serve":
        serve(a[1])
    elif a[0] == "template":
        template(a[1], a[2])
    elif a[0] == "profile":
        profile(a[1], int(a[2]), int(a[3]))
    else:
        sys.exit("usage: llm.py decode|prefill|suite|serve|template|profile ...")


if __name__ == "__main__":
    main(sys.argv[1:])
