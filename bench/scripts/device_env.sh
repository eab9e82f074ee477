# Source on the GPU host (no package index there): install the carried wheels and make the
# repository importable as `tritondx` without building it. Installs once per machine: a second
# `source` (run_suite.sh sources it too) must not rewrite /tmp/site under processes importing from
# it (on 2026-11-30 that race broke two concurrent runs with "No module named 'langsmith._client'").
# Carried debs (.debs/*.deb: bubblewrap only) unpack over /; libcap (.debs/opt/) is copied in only where the image
# lacks it: a bookworm libcap deb unpacked over / replaced the image's /lib -> usr/lib link (session 9).
for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" / 2>/dev/null; done
if [ -d .debs/opt ] && ! ldconfig -p | grep -q libcap.so.2; then
  mkdir -p /tmp/lc && dpkg -x .debs/opt/*.deb /tmp/lc && cp -a /tmp/lc/lib/x86_64-linux-gnu/libcap.so.2* \
    /usr/lib/x86_64-linux-gnu/ && ldconfig
fi
set -e
if [ ! -f /tmp/site/.tritondx-installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  touch /tmp/site/.tritondx-installed
fi
mkdir -p /tmp/pkg && ln -sfn "$PWD" /tmp/pkg/tritondx
export PYTHONPATH=/tmp/pkg:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PATH=/tmp/site/bin:$PATH
export PYTHONUNBUFFERED=1
set +e
