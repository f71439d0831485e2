#!/usr/bin/env bash
# The main job, on a fresh machine: one whole incident, for real.
#   1. builds oomguard (the JNI library and the command line);
#   2. starts the development collector (a tus receiver) on loopback;
#   3. runs a leaky Java 17 app with the agent started as Application.onCreate would;
#   4. the heap trigger fires (three ascending polls over 85 % of a 256 MB heap);
#   5. the agent dumps the heap in process, stripped while HotSpot writes it (GOT hook on libjvm);
#   6. the dump is analysed in a separate process (oomguard analyze, nice 19, memory-limited);
#   7. the report, inventories and the compressed mini dump are uploaded (tus, resumable);
#   8. prints the received report's leaks;
#   9. checks that every page the collector serves answers, and prints the collector's URL
#      (it serves them until Enter is pressed, when run from a terminal).
# Then, as a second act, it shows the HPROF tools on the received dump (inspect, restore).
# Usage: scripts/demo.sh [WORKDIR]      (default target/demo)
# Time: the first run builds oomguard in release mode, which takes several minutes on a 2-core
# machine (cargo shows its progress); later runs take about 20 seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
need_java

work="$(realpath -m "${1:-target/demo}")"
# Only what this script makes is removed, never WORKDIR itself.
rm -rf "$work/classes" "$work/app-data" "$work/collected" "$work/done" "$work"/*.log "$work"/*.hprof
mkdir -p "$work/classes" "$work/app-data" "$work/collected"

echo "== 1. build (release mode: the first run compiles everything, several minutes on a 2-core machine; later runs seconds)"
# (scripts/lib/setup.sh's build_release says why it is two commands, and why test.sh skips it.)
if [ "${OOMGUARD_DEMO_BUILT:-}" != 1 ]; then
  build_release
fi
bin="$PWD/target/release/oomguard"
javac -d "$work/classes" -sourcepath java:crates/cli/tests/java/leakapp java/demo/DemoApp.java java/dev/oomguard/*.java

echo "== 2. the collector"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" collect --listen "127.0.0.1:$port" --dir "$work/collected" >"$work/collector.log" 2>&1 &
collector=$!
trap 'kill $collector 2>/dev/null || true; wait $collector 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "collector listening" "$work/collector.log" && break; sleep 0.1; done
head -1 "$work/collector.log"
endpoint=$(grep -o 'tus endpoint [^ ]*' "$work/collector.log" | awk '{print $3}')

echo "== 3-7. the leaky app, with the agent (default policy; polls every 500 ms for the demo)"
cat >"$work/policy.json" <<JSON
{ "version": 1, "poll_interval_ms": 500, "upload": { "url": "$endpoint", "unmetered_only": false } }
JSON
OOMGUARD_BIN="$bin" RUST_LOG="${RUST_LOG:-info}" java -Xmx256m -XX:+UseG1GC \
  -Djava.library.path="$PWD/$SHIP_LIB_DIR" -cp "$work/classes" \
  DemoApp "$work/app-data" "$work/policy.json" "$work/done" 120 2>&1 | tee "$work/app.log" &
app=$!
# Wait until the collector has the report and the app's spool is empty (every file acknowledged).
ok=""
for _ in $(seq 600); do
  if grep -q "received report" "$work/collector.log" && [ -d "$work/app-data/spool/incidents" ] \
     && [ -z "$(ls -A "$work/app-data/spool/incidents")" ]; then ok=1; break; fi
  kill -0 $app 2>/dev/null || break
  sleep 0.2
done
touch "$work/done"
wait $app || true
[ -n "$ok" ] || { echo "demo: the incident did not reach the collector; see $work/app.log and $work/collector.log" >&2; exit 1; }

echo "== 8. what the server received"
grep "received report" "$work/collector.log"
report=$(find "$work/collected" -name report.json | head -1)
python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("leaks:")
for p in r.get("gcPaths", [])[:5]:
    chain = " -> ".join(s.get("reference", "?") for s in p.get("path", []))
    print(f"  {p.get('leakReason')}: {p.get('instanceCount')} instance(s) via {p.get('gcRoot')}: {chain}")
    t = p.get("trace") or {}
    suspects = [n["className"] + ("" if n["reference"].startswith("[") else ".") + n["reference"]
                for n in t.get("nodes", []) if n.get("suspect")]
    if t:
        print(f"    leak trace from {t.get('root')}; suspect references: {', '.join(suspects) or 'none'}")
print("top dominators:")
for d in r.get("dominators", [])[:5]:
    print(f"  {d.get('className')}: {d.get('retainedSize', 0) / 1048576:.1f} MB retained")
print("runningInfo:", json.dumps({k: r.get("runningInfo", {}).get(k) for k in ("appVersion", "currentPage", "dumper", "pauseMs")}))
PY

echo "== 9. the pages, as the collector serves them"
# Every page the index links to is fetched while the collector runs: the index, /leaks, each
# incident's page and the files it links; a page that does not answer 200 fails the demo.
python3 - "http://127.0.0.1:$port/" <<'PY'
import re, sys, urllib.parse, urllib.request
base = sys.argv[1]
host = urllib.parse.urlsplit(base).netloc
seen, todo, bad = set(), ["/"], []
while todo and len(seen) < 200:
    path = todo.pop(0)
    if path in seen:
        continue
    seen.add(path)
    url = urllib.parse.urljoin(base, path)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = r.read().decode("utf-8", "replace") if "html" in r.headers.get("Content-Type", "") else ""
    except Exception as e:
        bad.append(f"{path}: {e}")
        continue
    for href in re.findall(r'href="([^"#]*)"', body):
        u = urllib.parse.urlsplit(urllib.parse.urljoin(url, href))
        if u.netloc == host and u.path not in seen and not u.path.endswith((".hprof.gz", ".hprof")):
            todo.append(u.path)
pages = sorted(p for p in seen if p.endswith("/") or p == "/leaks")
print(f"{len(seen)} links answered" + (f", {len(bad)} did not:" if bad else ""), *bad, sep="\n  ")
print("pages:", ", ".join(pages))
sys.exit(1 if bad else 0)
PY

echo "== the HPROF tools on the received mini dump"
mini=$(find "$work/collected" -name 'mini.hprof.gz' | head -1)
if [ -n "$mini" ]; then
  gunzip -c "$mini" >"$work/mini.hprof"
  "$bin" inspect "$work/mini.hprof" | sed -n '1,6p'
  "$bin" restore "$work/mini.hprof" -o "$work/restored.hprof"
  printf '%-22s %12s\n' file bytes
  for f in "$mini" "$work/mini.hprof" "$work/restored.hprof"; do printf '%-22s %12d\n' "$(basename "$f")" "$(stat -c %s "$f")"; done
fi

echo
echo "HTML pages: http://127.0.0.1:$port/ (the index; /leaks; one page per incident)"
if [ -t 0 ] && [ "${DEMO_SERVE:-1}" != 0 ]; then
  read -r -p "The collector serves them until you press Enter. " _ || true
fi
echo "To browse them again later: $bin collect --listen 127.0.0.1:$port --dir $work/collected"
