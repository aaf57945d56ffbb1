#!/usr/bin/env bash
# Real servers on 127.0.0.1 for the remote-shard tests (issue 28), around one
# command:   tests/remote/servers.sh [--need http,https,s3,proxy] -- CMD ARGS...
#
# Starts, in a private temp dir, on ports picked at run time: nginx (http,
# https: a directory over HTTP and HTTPS, with a CA made here), OpenStack
# Swift with s3api (s3: proxy, account, container and object servers and
# memcached; /work/shared/S3-SERVER-FACTS.md has the measured facts) and
# fault_proxy.py (proxy: in front of nginx's HTTP and of Swift, whichever
# run). Exports their coordinates (below), runs CMD, stops what it started
# by the PIDs it recorded and removes the temp dir; CMD's status is its
# status. Default: all four. A server whose program is missing: one line
# saying which, exit 77 (meson's skip). One that is there but does not come
# up within GF_TEST_SERVERS_TIMEOUT seconds (default 90: Swift takes ~2 s
# on an idle 2-core machine, 13-57 s measured beside other builds at load
# 9-18; the limit only says when to give up): the logs' tails, exit 1.
#
# Exported, for CMD:
#   GF_TEST_TMPDIR            the private temp dir (scratch room; removed after)
#   http/https: GF_TEST_HTTP_ROOT (files put here are served), GF_TEST_HTTP_URL
#     (http://127.0.0.1:P), GF_TEST_HTTPS_URL (https://127.0.0.1:P),
#     GF_TEST_CA_FILE (the CA's PEM; the certificate names IP:127.0.0.1 and
#     DNS:localhost), GF_TEST_HTTP_LOG (nginx's access log, one line a request:
#     `"GET /f HTTP/1.1" STATUS BODY_BYTES "RANGE" CONNECTION_SERIAL REQUEST_ON_IT`)
#   s3: GF_TEST_S3_ENDPOINT (http://127.0.0.1:P, path-style), GF_TEST_S3_BUCKET,
#     AWS_ACCESS_KEY_ID (test:tester), AWS_SECRET_ACCESS_KEY, AWS_REGION
#     (us-east-1), GF_TEST_S3_PUT (s3put.sh: FILE KEY uploads), GF_TEST_S3_NETRC
#     (a netrc with the key: curl --netrc-file, since the key has a colon)
#   proxy: GF_TEST_PROXY_HTTP_URL, GF_TEST_PROXY_S3_ENDPOINT (each only with
#     its upstream), GF_TEST_PROXY_CONTROL (fault_proxy.py's head says how)
#   http, with nginx's echo module (libnginx-mod-http-echo) installed:
#     GF_TEST_HTTP_DELAY_URL (http://127.0.0.1:P/delay: the same root, each
#     response's first byte GF_TEST_HTTP_DELAY_MS, default 50, late, by
#     nginx itself: latency that costs no relay's CPU)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
need=http,https,s3,proxy
if [ "${1:-}" = --need ]; then need=$2; shift 2; fi
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "usage: $0 [--need http,https,s3,proxy] -- CMD ARGS..." >&2; exit 2; }
want() { case ",$need," in *",$1,"*) return 0;; esac; return 1; }
skip() { echo "servers.sh: SKIP: $*"; exit 77; }
have() { local p; p=$(command -v "$1") && [ -f "$p" ] && [ -x "$p" ] && echo "$p"; } # bash's -v names non-executables too
PY=/usr/bin/python3 # Swift's tools need Debian's python, not another python3 on PATH
budget=${GF_TEST_SERVERS_TIMEOUT:-90}

# What is needed, before anything starts.
[ -x $PY ] || skip "no $PY (the fault proxy, the port picker and Swift need it)"
have curl >/dev/null || skip "no curl (the readiness checks use it)"
nginx_bin=$(have nginx || have /usr/sbin/nginx)
if want http || want https; then
    [ -n "$nginx_bin" ] || skip "http/https need nginx: not installed (apt-get install nginx)"
fi
want https && ! have openssl >/dev/null && skip "https needs openssl: not installed"
if want s3; then
    for p in swift-proxy-server swift-account-server swift-container-server swift-object-server; do
        have $p >/dev/null || skip "s3 needs $p: not installed (apt-get install swift-proxy swift-account swift-container swift-object)"
    done
    memcached_bin=$(have memcached)
    [ -n "$memcached_bin" ] || skip "s3 needs memcached: not installed"
    [ -r /etc/swift/swift.conf ] || skip "s3 needs /etc/swift/swift.conf (package swift): missing"
fi
if want proxy && ! want http && ! want https && ! want s3; then
    echo "servers.sh: the proxy needs http or s3 to stand in front of" >&2; exit 2
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/gf-servers.XXXXXX") || exit 1
pids=()
stop_all() {
    local p i
    [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null
    for i in $(seq 30); do # ~3 s for them to go, then KILL
        local alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    [ ${#pids[@]} -gt 0 ] && kill -KILL "${pids[@]}" 2>/dev/null
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done # reap: no zombies left
    pids=()
}
cleanup() { stop_all; unclaim_ports; [ -n "${reaper:-}" ] && kill "$reaper" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP
start() { # start LOGNAME CMD...: in the background, its PID recorded
    local log=$1; shift
    "$@" >"$T/$log.log" 2>&1 </dev/null &
    pids+=($!)
}
tails() { for f in "$T"/*.log; do echo "--- ${f##*/}"; tail -n 15 "$f"; done; }
ready() { # ready URL...: each answers 2xx within the budget, or false
    local u p
    for u in "$@"; do
        until curl -fsS -o /dev/null --max-time 2 ${GF_TEST_CA_FILE:+--cacert "$GF_TEST_CA_FILE"} "$u" 2>/dev/null; do
            [ "$(date +%s%N)" -lt "$deadline" ] || { echo "servers.sh: $u did not answer in $budget s" >&2; return 1; }
            for p in "${pids[@]}"; do
                kill -0 "$p" 2>/dev/null || { echo "servers.sh: a server exited (PID $p) before $u answered" >&2; return 1; }
            done
            sleep 0.1
        done
    done
}
# Ports: outside the kernel's ephemeral range (outgoing connections take
# those), each bound once to see it is free and claimed for this script's
# life by a link named for it in one directory that every run shares (the
# link points at our PID, so a claim whose owner died is taken back): the
# runs that meson starts side by side never pick the same port. A start
# that still loses a race (to a program that is not ours) is tried again
# with fresh ports.
claims=${TMPDIR:-/tmp}/gf-test-ports
pick_ports() {
    $PY - "$1" "$claims" "$$" <<'PY'
import os, random, socket, sys
want, claims, owner = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.makedirs(claims, mode=0o1777, exist_ok=True)
lo, hi = 20000, 32767
try:
    lo_e = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    hi = min(hi, lo_e - 1) if lo_e > lo + 1000 else hi
except OSError:
    pass
def claim(p):
    link = os.path.join(claims, str(p))
    try:
        os.symlink(owner, link)
        return True
    except FileExistsError:
        pass
    try:
        os.kill(int(os.readlink(link)), 0)
        return False  # its owner lives
    except ProcessLookupError:
        os.unlink(link)  # a dead run's claim
        return claim(p)
    except (OSError, ValueError):
        return False
got = []
while len(got) < want:
    p = random.randint(lo, hi)
    if p in got or not claim(p):
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); got.append(p)
    except OSError:
        os.unlink(os.path.join(claims, str(p)))
    finally:
        s.close()
print(" ".join(map(str, got)))
PY
}
unclaim_ports() { # the claims that point at this script
    local l
    for l in "$claims"/*; do [ "$(readlink "$l" 2>/dev/null)" = "$$" ] && rm -f "$l"; done
}

start_nginx() {
    local hp=$1 sp=$2
    mkdir -p "$T/www" "$T/nginx"
    if want https && [ ! -f "$T/ca.pem" ]; then
        (cd "$T" &&
         openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
             -subj /CN=gpufeed-test-CA -keyout ca.key -out ca.pem &&
         openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
             -subj /CN=localhost -keyout server.key -out server.csr &&
         printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'basicConstraints=CA:FALSE' \
             'keyUsage=digitalSignature' 'extendedKeyUsage=serverAuth' >server.ext &&
         openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" \
             -days 7 -extfile server.ext -out server.pem) >"$T/openssl.log" 2>&1 ||
            { cat "$T/openssl.log"; echo "servers.sh: openssl could not make the test CA" >&2; return 1; }
    fi
    local echo_mod=/usr/lib/nginx/modules/ngx_http_echo_module.so delay_ms=${GF_TEST_HTTP_DELAY_MS:-50}
    [ -f "$echo_mod" ] || echo_mod=""
    {
        [ -n "$echo_mod" ] && echo "load_module $echo_mod;"
        echo "daemon off; worker_processes 1; pid $T/nginx/nginx.pid; error_log $T/nginx-error.log warn;"
        [ "$(id -u)" = 0 ] && echo "user root;" # the temp dir is 0700: workers read it as its owner
        echo "events { worker_connections 1024; }"
        echo "http {"
        echo "  log_format gf '\"\$request\" \$status \$body_bytes_sent \"\$http_range\" \$connection \$connection_requests';"
        echo "  access_log $T/access.log gf;"
        for d in client_body proxy fastcgi uwsgi scgi; do echo "  ${d}_temp_path $T/nginx/$d;"; done
        echo "  default_type application/octet-stream; sendfile on; keepalive_timeout 65s;"
        echo "  keepalive_requests 100000; max_ranges 64;" # ranges on (0 would turn them off)
        echo "  server { listen 127.0.0.1:$hp;"
        want https && echo "    listen 127.0.0.1:$sp ssl; ssl_certificate $T/server.pem; ssl_certificate_key $T/server.key;"
        echo "    root $T/www;"
        [ -n "$echo_mod" ] && printf '    %s\n' \
            "location /delay/ { echo_sleep $(awk -v m="$delay_ms" 'BEGIN { printf "%.3f", m / 1000 }'); echo_exec @delayed; }" \
            'location @delayed { rewrite ^/delay/(.*)$ /$1 break; }'
        echo "  }"
        echo "}"
    } >"$T/nginx/nginx.conf"
    : >"$T/access.log"
    start nginx "$nginx_bin" -p "$T/nginx" -c "$T/nginx/nginx.conf" -e "$T/nginx-error.log"
    export GF_TEST_HTTP_ROOT=$T/www GF_TEST_HTTP_URL=http://127.0.0.1:$hp GF_TEST_HTTP_LOG=$T/access.log
    [ -n "$echo_mod" ] && export GF_TEST_HTTP_DELAY_URL=http://127.0.0.1:$hp/delay GF_TEST_HTTP_DELAY_MS=$delay_ms
    want https && export GF_TEST_HTTPS_URL=https://127.0.0.1:$sp GF_TEST_CA_FILE=$T/ca.pem
    echo "<html>gpufeed test root</html>" >"$T/www/index.html"
    ready "$GF_TEST_HTTP_URL/" ${GF_TEST_HTTPS_URL:+"$GF_TEST_HTTPS_URL/"} && : >"$GF_TEST_HTTP_LOG" # the probes are not the tests'
}

start_swift() {
    local px=$1 ac=$2 co=$3 ob=$4 mc=$5 s=$T/swift name
    mkdir -p "$s" "$T/srv/d1"
    $PY - "$s" "$ac" "$co" "$ob" <<'PY' >"$T/rings.log" 2>&1 || { cat "$T/rings.log"; return 1; }
import sys
from swift.common.ring import RingBuilder
d, ports = sys.argv[1], dict(zip(("account", "container", "object"), map(int, sys.argv[2:])))
for name, port in ports.items():
    b = RingBuilder(4, 1, 0)  # 16 partitions, 1 replica, no min_part_hours
    b.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1", "port": port,
               "device": "d1", "weight": 1.0})
    b.rebalance()
    b.get_ring().save("%s/%s.ring.gz" % (d, name))
PY
    local common="[DEFAULT]
bind_ip = 127.0.0.1
workers = 0
user = $(id -un)
swift_dir = $s
devices = $T/srv
mount_check = false
log_level = WARNING
log_address = $T/no-syslog"
    for name in account:$ac container:$co object:$ob; do
        printf '%s\nbind_port = %s\n[pipeline:main]\npipeline = healthcheck %s-server\n[app:%s-server]\nuse = egg:swift#%s\n[filter:healthcheck]\nuse = egg:swift#healthcheck\n' \
            "$common" "${name#*:}" "${name%:*}" "${name%:*}" "${name%:*}" >"$s/${name%:*}-server.conf"
    done
    cat >"$s/proxy-server.conf" <<EOF
$common
bind_port = $px
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk s3api tempauth copy slo dlo proxy-logging proxy-server
[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$mc
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:bulk]
use = egg:swift#bulk
[filter:s3api]
use = egg:swift#s3api
location = us-east-1
[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
EOF
    local mcuser=()
    [ "$(id -u)" = 0 ] && mcuser=(-u root) # memcached refuses root without -u
    start memcached "$memcached_bin" -l 127.0.0.1 -p "$mc" -U 0 -m 16 "${mcuser[@]}"
    for name in account container object proxy; do
        start swift-$name swift-$name-server "$s/$name-server.conf" -v
    done
    export GF_TEST_S3_ENDPOINT=http://127.0.0.1:$px GF_TEST_S3_BUCKET=gpufeed-test
    export AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
    export AWS_DEFAULT_REGION=us-east-1 GF_TEST_S3_PUT=$here/s3put.sh GF_TEST_S3_NETRC=$T/s3.netrc
    unset AWS_SESSION_TOKEN AWS_PROFILE AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE AWS_ENDPOINT_URL
    printf 'machine 127.0.0.1 login %s password %s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$GF_TEST_S3_NETRC"
    ready "http://127.0.0.1:$ac/healthcheck" "http://127.0.0.1:$co/healthcheck" \
          "http://127.0.0.1:$ob/healthcheck" "http://127.0.0.1:$px/healthcheck" || return 1
    until (: </dev/tcp/127.0.0.1/"$mc") 2>/dev/null; do
        [ "$(date +%s%N)" -lt "$deadline" ] || { echo "servers.sh: memcached did not listen" >&2; return 1; }
        sleep 0.05
    done
    # The bucket; the first PUT also autocreates the account.
    curl -fsS -o "$T/bucket.out" --netrc-file "$GF_TEST_S3_NETRC" --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
        -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT "$GF_TEST_S3_ENDPOINT/$GF_TEST_S3_BUCKET" ||
        { cat "$T/bucket.out"; echo "servers.sh: Swift refused to make the bucket" >&2; return 1; }
}

start_proxy() {
    local ups=()
    [ -n "${GF_TEST_HTTP_URL:-}" ] && ups+=("http=${GF_TEST_HTTP_URL#http://}")
    [ -n "${GF_TEST_S3_ENDPOINT:-}" ] && ups+=("s3=${GF_TEST_S3_ENDPOINT#http://}")
    start fault-proxy $PY "$here/fault_proxy.py" "$T/proxy.ports" "${ups[@]}"
    until [ -s "$T/proxy.ports" ]; do
        [ "$(date +%s%N)" -lt "$deadline" ] || { echo "servers.sh: the fault proxy did not start" >&2; return 1; }
        kill -0 "${pids[-1]}" 2>/dev/null || { echo "servers.sh: the fault proxy exited" >&2; return 1; }
        sleep 0.05
    done
    local name port
    while read -r name port; do
        case $name in
            http) export GF_TEST_PROXY_HTTP_URL=http://127.0.0.1:$port GF_TEST_PROXY_CONTROL=http://127.0.0.1:$port/__fault;;
            s3) export GF_TEST_PROXY_S3_ENDPOINT=http://127.0.0.1:$port
                [ -n "${GF_TEST_PROXY_CONTROL:-}" ] || export GF_TEST_PROXY_CONTROL=http://127.0.0.1:$port/__fault;;
        esac
    done <"$T/proxy.ports"
    ready "$GF_TEST_PROXY_CONTROL"
}

start_all() {
    local ports
    read -ra ports <<<"$(pick_ports 7)"
    deadline=$(($(date +%s%N) + budget * 1000000000))
    if want http || want https; then start_nginx "${ports[0]}" "${ports[1]}" || return 1; fi
    if want s3; then start_swift "${ports[@]:2:5}" || return 1; fi
    if want proxy; then start_proxy || return 1; fi
}

t0=$(date +%s%N)
for attempt in 1 2 3; do
    start_all && break
    # nginx and memcached say "Address already in use"; Swift retries for
    # 30 s, then says "Could not bind".
    if [ $attempt = 3 ] || ! grep -qiE "address already in use|could not bind" "$T"/*.log 2>/dev/null; then
        tails; echo "servers.sh: the servers ($need) did not start; logs above" >&2; exit 1
    fi
    echo "servers.sh: a port was taken meanwhile; again with others" >&2
    stop_all; unclaim_ports; rm -f "$T"/*.log "$T/proxy.ports"
done
export GF_TEST_TMPDIR=$T
echo "servers.sh: $need ready in $((($(date +%s%N) - t0) / 1000000)) ms" >&2
# If this shell is killed outright (SIGKILL: no trap runs), the servers,
# Swift's outside our process group, would outlive it: a watcher in a
# session of its own stops them and removes the temp dir when it goes.
# TERM first: nginx's master, KILLed, would leave its worker serving.
printf '%s\n' "${pids[@]}" >"$T/pids"
setsid /bin/sh -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
    [ -f "$2/pids" ] && kill -TERM $(cat "$2/pids") 2>/dev/null && sleep 3 &&
    kill -KILL $(cat "$2/pids") 2>/dev/null; rm -rf "$2"' \
    gf-servers-watch $$ "$T" >/dev/null 2>&1 </dev/null &
reaper=$!
"$@"
rc=$?
exit $rc
