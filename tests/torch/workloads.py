# workloads.py: PyTorch workloads for the GPU suite and `make bench-torch`.
# Each prints one line, "NAME ok RESULT", where RESULT is a digest of what
# the GPU computed (weights, outputs, tokens), so a run through Cicada can
# be compared with a native run bit for bit; or "NAME FAIL why". Times go
# to stderr, never into the compared lines.
#
#   python3 workloads.py [NAME...]        the named workloads (default all)
#   python3 workloads.py train STEPS MS   CNN training that prints "step N
#       loss" after every step and sleeps MS ms between steps, then "done
#       DIGEST": the program that the checkpoint tests dump mid-way.
#   python3 workloads.py share-train STEPS MS   the share workload, printing
#       "step N sum" after every step and sleeping MS ms between steps,
#       then "done DIGEST": what the checkpoint tests dump mid-way.
#   python3 workloads.py bench SECONDS    CNN steps/s and decode tokens/s.
#   python3 workloads.py allreduce-bench [REPS]   a single-process NCCL
#       all-reduce over two GPUs, its median time (make bench).
#   python3 workloads.py ddp-worker       one rank of the ddp workload (torchrun
#       starts two: one process per GPU, NCCL between them).
#   python3 workloads.py nccl-train STEPS MS   two GPUs in one process, an
#       NCCL all-reduce every step, printing "step N sum" and sleeping MS ms
#       between steps, then "done DIGEST": dumped mid-way by torch-cr-nccl.
#   torchrun --nproc_per_node=2 workloads.py ddp-train STEPS MS   one rank of
#       a DDP training run; rank 0 prints "step N loss" after every step,
#       then "done DIGEST".
#   python3 workloads.py ddp-launch STEPS MS   the same two ranks started as
#       a batch system's launcher would (srun, mpirun: the rendezvous
#       variables set, no torchrun agent), rank 0's lines relayed: the job
#       torch-cr-ddp dumps mid-way (torchrun's agent holds an io_uring,
#       which criu cannot dump).
#   python3 workloads.py migrate-train STEPS MS HOST_MIB DEV_MIB DIRTY   a
#       transformer trained with AdamW under bf16 autocast, beside HOST_MIB
#       of host memory and DEV_MIB of device memory of which DIRTY percent
#       is rewritten every step; prints "step N loss" and sleeps MS ms per
#       step, then "done DIGEST" of all three: what make bench-migrate moves.
# two-gpus, nccl and ddp need two GPUs; with one they say "one GPU".
import hashlib, os, sys, time, traceback

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch

torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.use_deterministic_algorithms(True)


def digest(ts):
    h = hashlib.sha256()
    for t in ts:
        h.update(t.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def data(n, seed):
    x = torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(seed))
    y = torch.randint(0, 10, (n,), generator=torch.Generator().manual_seed(seed + 1))
    return x.cuda(), y.cuda()


def cnn_model(width=16):
    torch.manual_seed(0)
    w = width
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(w, 2 * w, 3, padding=1), torch.nn.BatchNorm2d(2 * w), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(2 * w, 4 * w, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(4 * w, 10)).cuda()


def cnn_step(m, opt, x, y, amp=None, scaler=None):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=amp, enabled=amp is not None):
        loss = torch.nn.functional.cross_entropy(m(x), y)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()
    return loss


def cnn(steps=30, amp=None):
    m = cnn_model()
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda") if amp == torch.float16 else None
    x, y = data(64, 2)
    for _ in range(steps):
        loss = cnn_step(m, opt, x, y, amp, scaler)
    torch.cuda.synchronize()
    return "loss=%.6f w=%s" % (loss.item(), digest(m.parameters()))


def randn():
    g = torch.Generator(device="cuda").manual_seed(1)
    return digest([torch.randn(1000, device="cuda", generator=g), torch.rand(333, device="cuda", generator=g)])


def gpt_config():
    import transformers
    return transformers.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=128)


def gpt_decode():
    import transformers
    torch.manual_seed(0)
    m = transformers.GPT2LMHeadModel(gpt_config()).cuda().eval()
    ids = torch.tensor([[1, 2, 3, 4]], device="cuda")
    out = m.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
    return " ".join(map(str, out[0].tolist()))


def gpt_train(steps=5):
    import transformers
    torch.manual_seed(0)
    m = transformers.GPT2LMHeadModel(gpt_config()).cuda().train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    ids = torch.randint(0, 1000, (4, 64), generator=torch.Generator().manual_seed(5)).cuda()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = m(ids, labels=ids).loss
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return "loss=%.6f w=%s" % (loss.item(), digest(m.parameters()))


def compiled():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).cuda()
    c = torch.compile(m)
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(4)).cuda()
    return digest([c(x), c(x * 2)])


def graphs():
    torch.manual_seed(0)
    m = torch.nn.Linear(128, 128).cuda()
    x = torch.randn(16, 128, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            y = m(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = m(x)
    outs = []
    for i in range(5):
        x.copy_(torch.full((16, 128), float(i), device="cuda"))
        g.replay()
        outs.append(y.clone())
    return digest(outs)


def events():
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    x = torch.randn(2048, 2048, device="cuda")
    a.record()
    y = x @ x
    b.record()
    b.synchronize()
    return "elapsed>0=%s" % (a.elapsed_time(b) > 0)


def mapped():
    x = torch.arange(1000, dtype=torch.float32).pin_memory()
    y = x.cuda(non_blocking=True) * 2
    back = torch.empty(1000).pin_memory()
    back.copy_(y, non_blocking=True)
    torch.cuda.synchronize()
    return digest([y, back])


def expandable():
    # the caching allocator's expandable segments use the VMM API
    torch.cuda.memory._set_allocator_settings("expandable_segments:True")
    ts = [torch.full((1 << 20,), float(i), device="cuda") for i in range(40)]
    del ts[::2]
    more = [torch.ones(3 << 20, device="cuda") * i for i in range(4)]
    r = digest(ts + more)
    torch.cuda.memory._set_allocator_settings("expandable_segments:False")
    return r


def nvml():
    # the NVML queries PyTorch makes itself (ctypes on libnvidia-ml.so.1)
    n = torch.cuda._raw_device_count_nvml()
    uuids = torch.cuda._raw_device_uuid_nvml() or []
    return "nvml-devices=%d uuids=%d cuda-devices=%d name=%s" % (n, len(uuids), torch.cuda.device_count(),
                                                                torch.cuda.get_device_name(0))


def two_gpus():
    # peer copies and a matmul on each GPU (one GPU: says so)
    if torch.cuda.device_count() < 2:
        return "one GPU"
    torch.manual_seed(0)
    a = torch.randn(512, 512, device="cuda:0")
    b = a.to("cuda:1")
    c = (b @ b).to("cuda:0") + a @ a
    return digest([c, b.to("cuda:0", non_blocking=True)])


def nccl():
    # a single-process all-reduce over the first two GPUs
    if torch.cuda.device_count() < 2:
        return "one GPU"
    import torch.cuda.nccl as n
    ts = [torch.full((1 << 20,), float(i + 1), device="cuda:%d" % i) for i in range(2)]
    n.all_reduce(ts)
    torch.cuda.synchronize()
    return "sum=%s %s" % (ts[1][0].item(), digest([t.cpu() for t in ts]))


def ddp():
    # torchrun, one process per GPU, NCCL between them: the loss curve
    if torch.cuda.device_count() < 2:
        return "one GPU"
    import subprocess
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        __file__, "ddp-worker"], capture_output=True, text=True, timeout=300)
    losses = [l for l in r.stdout.splitlines() if l.startswith("losses ")]
    if r.returncode or not losses:
        raise RuntimeError("torchrun failed: %s" % (r.stderr.strip().splitlines() or ["?"])[-1])
    return losses[0]


def ddp_worker():
    import torch.distributed as dist
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    m = torch.nn.parallel.DistributedDataParallel(cnn_model(8), device_ids=[rank])
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    x, y = data(32, 10 + rank)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append("%.6f" % loss.item())
    if rank == 0:
        print("losses " + " ".join(losses), flush=True)
    dist.destroy_process_group()


def nccl_train(steps, ms):
    # what torch-cr-nccl dumps mid-way: one process, two GPUs, an NCCL
    # all-reduce every step
    import torch.cuda.nccl as nc
    ws = [torch.randn(512, 512, generator=torch.Generator().manual_seed(i)).cuda(i) for i in range(2)]
    for i in range(steps):
        with torch.no_grad():
            ts = [torch.tanh(w @ w.t()) * 0.01 for w in ws]
            nc.all_reduce(ts)
            for w, t in zip(ws, ts):
                w.mul_(0.9).add_(t)
        print("step %d sum=%.6f %.6f" % (i, ws[0].sum().item(), ws[1].sum().item()), flush=True)
        time.sleep(ms / 1000.0)
    print("done %s" % digest(ws), flush=True)


def ddp_train(steps, ms):
    # one rank of what torch-cr-ddp dumps mid-way (torchrun starts two)
    import torch.distributed as dist
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    m = torch.nn.parallel.DistributedDataParallel(cnn_model(8), device_ids=[rank])
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    x, y = data(32, 10 + rank)
    for i in range(steps):
        loss = cnn_step(m, opt, x, y)
        if rank == 0:
            print("step %d loss=%.8f" % (i, loss.item()), flush=True)
        time.sleep(ms / 1000.0)
    if rank == 0:
        print("done %s" % digest(list(m.parameters()) + list(m.buffers())), flush=True)
    dist.destroy_process_group()


def ddp_launch(steps, ms):
    # rank 0 serves the store on PyTorch's own backend (USE_LIBUV=0: libuv's
    # loop holds an io_uring); each rank's output goes where the launcher's
    # does; the launcher fails if either rank does
    import socket, subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
        procs.append(subprocess.Popen([sys.executable, __file__, "ddp-train", str(steps), str(ms)], env=env))
    rcs = [p.wait(timeout=600) for p in procs]
    if any(rcs):
        raise SystemExit("ddp-launch: a rank failed (exit %s)" % rcs)


def share_child(conn):
    # the other process of share: updates the parent's tensor in place
    w = conn.recv()
    while True:
        i = conn.recv()
        if i is None:
            break
        with torch.no_grad():
            w.mul_(0.5).add_(torch.tanh(w @ w.t()) * 0.01 + i)
        torch.cuda.synchronize()
        conn.send(i)


def share(steps=10, ms=0, verbose=False):
    # torch.multiprocessing: a CUDA tensor handed to a spawned process (CUDA
    # IPC memory and event handles) through a pipe, written by both in turn
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    torch.manual_seed(0)
    w = torch.randn(256, 256, device="cuda")
    conn, theirs = ctx.Pipe()
    p = ctx.Process(target=share_child, args=(theirs,))
    p.start()
    try:
        conn.send(w)
        for i in range(steps):
            conn.send(i)
            if not conn.poll(120):
                raise RuntimeError("the other process did not answer")
            conn.recv()
            with torch.no_grad():
                w.mul_(0.99)
            s = w.sum().item()
            if verbose:
                print("step %d sum=%.6f" % (i, s), flush=True)
            time.sleep(ms / 1000.0)
        conn.send(None)
        p.join(timeout=120)
    finally:
        if p.is_alive():
            p.kill()
    if p.exitcode != 0:
        raise RuntimeError("the other process failed (exit %s)" % p.exitcode)
    return digest([w])


def llm(dtype):
    # a GPT-2-medium-sized model in half precision (tests/torch/llm.py):
    # greedy decode at batch 1 and 8, and a 512-token prefill's argmax
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import llm as L
    m = L.model(dtype)
    outs = [L.generate(m, L.prompt(b, 16), 16) for b in (1, 8)]
    with torch.no_grad():
        outs.append(m(L.prompt(1, 512)).logits.argmax(-1))
    return hashlib.sha256(b"".join(o.cpu().numpy().tobytes() for o in outs)).hexdigest()[:16]


WORKLOADS = {"randn": randn, "cnn": cnn, "amp-bf16": lambda: cnn(20, torch.bfloat16),
             "amp-fp16": lambda: cnn(20, torch.float16), "gpt-decode": gpt_decode, "gpt-train": gpt_train,
             "llm-fp16": lambda: llm("fp16"), "llm-bf16": lambda: llm("bf16"), "compile": compiled, "graphs": graphs, "events": events, "mapped": mapped,
             "expandable": expandable, "nvml": nvml, "share": share, "two-gpus": two_gpus, "nccl": nccl,
             "ddp": ddp}


def run(names):
    for name in names:
        t0 = time.time()
        try:
            print("%s ok %s" % (name, WORKLOADS[name]()), flush=True)
        except Exception as e:
            print("%s FAIL %s" % (name, str(e).splitlines()[0][:300] if str(e) else type(e).__name__), flush=True)
            traceback.print_exc(file=sys.stderr)
        print("%s: %.2f s" % (name, time.time() - t0), file=sys.stderr, flush=True)
    print("workloads done", flush=True)


def train(steps, ms):
    # what the checkpoint tests dump mid-way: every step prints its loss
    m = cnn_model()
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    x, y = data(64, 2)
    for i in range(steps):
        loss = cnn_step(m, opt, x, y)
        print("step %d loss=%.8f" % (i, loss.item()), flush=True)
        time.sleep(ms / 1000.0)
    print("done %s" % digest(list(m.parameters()) + list(m.buffers())), flush=True)


def migrate_train(steps, ms, host_mib, dev_mib, dirty):
    import transformers
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=6, n_head=8, n_embd=512, vocab_size=8000, n_positions=256)
    m = transformers.GPT2LMHeadModel(cfg).cuda().train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    ids = torch.randint(0, 8000, (8, 128), generator=torch.Generator().manual_seed(5)).cuda()
    host = torch.arange(host_mib << 17, dtype=torch.int64)              # HOST_MIB of host state
    dev = torch.arange(dev_mib << 18, dtype=torch.int32, device="cuda")  # DEV_MIB on the GPU
    chunk = max(1, dev.numel() * dirty // 100)
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(ids, labels=ids).loss
        loss.backward()
        opt.step()
        if dirty:
            at = (i * chunk) % max(1, dev.numel() - chunk)
            dev[at:at + chunk].add_(i + 1)
        host[(i * 4096) % host.numel()] += 1
        print("step %d loss=%.6f" % (i, loss.item()), flush=True)
        time.sleep(ms / 1000.0)
    h = hashlib.sha256(host.numpy().tobytes()).hexdigest()[:16]
    d = "%x.%s" % (dev.sum(dtype=torch.int64).item(), digest([dev[::4099]]))
    print("done %s dev %s host %s" % (digest(m.parameters()), d, h), flush=True)


def quota(mib):
    """Under a --memory-quota of MIB: the caching allocator sees the quota
    as the GPU's memory, training within it runs, a tensor past it is a
    clean OutOfMemoryError, and training goes on after it."""
    free_b, total = torch.cuda.mem_get_info()
    if total != mib << 20:
        raise RuntimeError("mem_get_info total %d, not the quota %d" % (total, mib << 20))
    first = cnn(10)
    try:
        torch.empty((2 * mib) << 20, dtype=torch.uint8, device="cuda")
        raise RuntimeError("a tensor of twice the quota was given")
    except torch.cuda.OutOfMemoryError:
        pass
    torch.cuda.empty_cache()
    again = cnn(10)
    print("quota total %d MiB, oom clean, %s" % (total >> 20, "same" if first == again else "DIFFERS"), flush=True)


def rate(fn, seconds):
    fn()  # warm up: kernels loaded, allocator filled, libraries chosen
    torch.cuda.synchronize()
    n, t0 = 0, time.time()
    while time.time() - t0 < seconds:
        fn()
        n += 1
    torch.cuda.synchronize()
    return n, time.time() - t0


def bench(seconds):
    m = cnn_model(32)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    x, y = data(128, 2)
    n, t = rate(lambda: cnn_step(m, opt, x, y), seconds)
    print("cnn-steps-per-s %.2f" % (n / t), flush=True)
    import transformers
    torch.manual_seed(0)
    g = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=6, n_head=8, n_embd=512, vocab_size=8000,
                                                             n_positions=256)).cuda().eval()
    ids = torch.tensor([[1, 2, 3, 4]], device="cuda")
    new = 64
    n, t = rate(lambda: g.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                   pad_token_id=0), seconds)
    print("decode-tokens-per-s %.1f" % (n * new / t), flush=True)


def allreduce_bench(reps):
    # make bench: a single-process NCCL all-reduce over the first two GPUs
    # (torch.cuda.nccl, as the nccl workload), the median of reps timed
    # calls after a warm-up, for 1 MiB and 64 MiB of float32 a GPU; lines
    # "metric NAME VALUE UNIT" as cicada-bench prints them
    n = torch.cuda.device_count()
    print("metric allreduce_gpus %d GPUs" % n, flush=True)
    if n < 2:
        return
    import torch.cuda.nccl as nc
    for mib in (1, 64):
        ts = [torch.ones(mib << 18, device="cuda:%d" % i) for i in range(2)]
        times = []
        for k in range(reps + 3):
            for i in range(2):
                torch.cuda.synchronize(i)
            t0 = time.perf_counter()
            nc.all_reduce(ts)
            for i in range(2):
                torch.cuda.synchronize(i)
            if k >= 3:
                times.append(time.perf_counter() - t0)
        got = ts[0][0].item()
        if got != 2.0 ** (reps + 3):
            raise RuntimeError("all-reduce of %d MiB gave %s, not %s" % (mib, got, 2.0 ** (reps + 3)))
        times.sort()
        print("metric allreduce_%dmib_us %.6g us" % (mib, times[len(times) // 2] * 1e6), flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["train"]:
        train(int(a[1]), int(a[2]))
    elif a[:1] == ["share-train"]:
        print("done %s" % share(int(a[1]), int(a[2]), True), flush=True)
    elif a[:1] == ["bench"]:
        bench(float(a[1]))
    elif a[:1] == ["migrate-train"]:
        migrate_train(*[int(v) for v in a[1:6]])
    elif a[:1] == ["quota"]:
        quota(int(a[1]))
    elif a[:1] == ["allreduce-bench"]:
        allreduce_bench(int(a[1]) if a[1:] else 20)
    elif a[:1] == ["ddp-worker"]:
        ddp_worker()
    elif a[:1] == ["nccl-train"]:
        nccl_train(int(a[1]), int(a[2]))
    elif a[:1] == ["ddp-train"]:
        ddp_train(int(a[1]), int(a[2]))
    elif a[:1] == ["ddp-launch"]:
        ddp_launch(int(a[1]), int(a[2]))
    else:
        run(a or list(WORKLOADS))
