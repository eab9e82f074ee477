set -x
for f in .debs/*.deb; do dpkg -x $f /; done
which bwrap; bwrap --version
bwrap --ro-bind / / --dev-bind /dev /dev --proc /proc --tmpfs /tmp --unshare-all --die-with-parent --new-session python3 -c "import torch; print(torch.cuda.is_available(), torch.cuda.get_device_name())"
unshare -rn --pid --fork --kill-child --mount-proc python3 -c "import torch; print('unshare', torch.cuda.is_available())"
source bench/scripts/device_env.sh
python3 -m pip install -q --no-index --no-deps --target /tmp/site2 .whl/liger_kernel*.whl && PYTHONPATH=/tmp/site2:$PYTHONPATH python3 -c "import liger_kernel.ops.rms_norm as m; print('liger ok')"
which ncu; nvidia-smi --query-gpu=name,driver_version --format=csv
python3 - <<'PY'
import torch, time, importlib.util, glob
for p in sorted(glob.glob('.corpus/tbg_*.py'))[:34]:
    t=time.time()
    try:
        spec=importlib.util.spec_from_file_location('m',p); m=importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        ins=m.make_inputs(("full",), None, 0, "cuda") if m.make_inputs.__code__.co_argcount>=4 else None
        out=m.launch(*ins); torch.cuda.synchronize()
        print("OK", p, round(time.time()-t,2))
    except Exception as e:
        print("FAIL", p, type(e).__name__, str(e)[:100])
PY
