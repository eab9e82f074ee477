# Source on the GPU host (no package index there): install the carried wheels and make the
# repository importable as `tritondx` without building it.
set -e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p /tmp/pkg && ln -sfn "$PWD" /tmp/pkg/tritondx
export PYTHONPATH=/tmp/pkg:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PATH=/tmp/site/bin:$PATH
export PYTHONUNBUFFERED=1
set +e
