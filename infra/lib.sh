# Shared helpers for the infra scripts. Sourced, not run.
# ROOT is the repository; RUN_DIR holds everything the scripts create (ignored by git).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${REQUESTER_RUN_DIR:-$ROOT/.run}"
mkdir -p "$RUN_DIR"

say()  { printf '\033[1;34m[infra]\033[0m %s\n' "$*" >&2; }
fail() { printf '\033[1;31m[infra] error:\033[0m %s\n' "$*" >&2; exit 1; }

# port_open HOST PORT — true when something accepts TCP connections there.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# wait_port HOST PORT SECONDS WHAT LOGFILE
wait_port() {
  local host=$1 port=$2 secs=$3 what=$4 log=${5:-}
  for ((i = 0; i < secs * 5; i++)); do
    port_open "$host" "$port" && return 0
    sleep 0.2
  done
  [ -n "$log" ] && [ -f "$log" ] && { echo "--- last lines of $log ---" >&2; tail -n 30 "$log" >&2; }
  fail "$what did not start listening on $host:$port within ${secs}s"
}

# url_host_port URL DEFAULT_PORT — prints "host port" of redis://, postgres:// URLs.
url_host_port() {
  local rest=${1#*://}
  rest=${rest#*@}
  rest=${rest%%/*}
  rest=${rest%%\?*}
  local host=${rest%%:*} port=${rest##*:}
  [ "$host" = "$rest" ] && port=$2
  [ -z "$host" ] && host=127.0.0.1
  [ "$host" = localhost ] && host=127.0.0.1
  echo "$host $port"
}

# apt_install WHY PKG... — installs Debian packages as root, or with password-less sudo; otherwise
# fails saying the command to run. Sets SUDO for the caller's own follow-up commands.
apt_install() {
  local why=$1
  shift
  command -v apt-get >/dev/null || fail "$why, and there is no apt-get here: install $* yourself"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=sudo; else
      fail "$why: run 'sudo apt-get update && sudo apt-get install -y --no-install-recommends $*'"
    fi
  fi
  say "$why: apt-get install -y --no-install-recommends $*"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >&2
}
