#!/usr/bin/env bash
# Installs what the reference apps in examples/libraries need (run by
# `scripts/install-deps --for-libraries`). Idempotent: what is present is left alone.
#  - Debian packages, at the versions the apps were measured with when the archive still has
#    them, else the archive's own version with a warning (a Debian point release replaces old
#    builds; the READMEs say which version each figure was measured with).
#  - bentocache from npm with `npm ci` (package-lock.json), into its node_modules.
#  - dogpile.cache from PyPI with pip (requirements.txt) into a venv under target/libraries.
# An app whose runtime cannot be had here is named with the reason, and the exit status is 3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

# The apps to install: those named as arguments (symfony rails caffeine bentocache dogpile),
# else all of them. `scripts/install-deps --for-tests` names the two its tests run.
if [ $# -gt 0 ]; then apps=" $* "; else apps=" symfony rails caffeine bentocache dogpile "; fi
want_app() { case "$apps" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for a in $apps; do
  case "$a" in symfony | rails | caffeine | bentocache | dogpile) ;; *)
    echo "usage: examples/libraries/install.sh [symfony] [rails] [caffeine] [bentocache] [dogpile]" >&2
    exit 2 ;;
  esac
done

# package=version as measured (Debian 12 "bookworm"), per app.
debian=()
want_app symfony && debian+=(
  php-cli=2:8.2+93 php-fpm=2:8.2+93 php-pgsql=2:8.2+93 php-redis=5.3.7+4.3.0-3
  php-symfony-cache=5.4.53+dfsg-0+deb12u1 nginx-light=1.22.1-9+deb12u12
)
want_app rails && debian+=(
  ruby=1:3.1 ruby-activesupport=2:6.1.7.10+dfsg-1~deb12u4 ruby-redis=4.8.0-1
  ruby-rack=2.2.22-0+deb12u2 ruby-connection-pool=2.2.5-1 ruby-pg=1.4.5-1+b1
  puma=5.6.5-3+deb12u2
)
want_app caffeine && debian+=(
  openjdk-17-jdk-headless=17.0.15+6-1~deb12u1 libcaffeine-java=2.6.2-1.1
  libpostgresql-jdbc-java=42.5.5-0+deb12u1
)
want_app dogpile && debian+=(python3-venv=3.11.2-1+b1)
failed=()

installed_version() { { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null || true; } | awk '$3 == "installed" {print $4}'; }

if ! command -v apt-get >/dev/null 2>&1; then
  echo "examples/libraries needs these Debian packages (or your system's equivalents): ${debian[*]}" >&2
  failed+=("Debian packages (no apt-get)")
else
  if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
  want=()
  for pin in "${debian[@]}"; do
    pkg=${pin%%=*} ver=${pin#*=}
    have=$(installed_version "$pkg")
    if [ -z "$have" ]; then
      want+=("$pin")
    elif [ "$have" != "$ver" ]; then
      echo "note: $pkg $have is installed; the apps were measured with $ver" >&2
    fi
  done
  if [ ${#want[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    args=()
    for pin in "${want[@]}"; do
      pkg=${pin%%=*} ver=${pin#*=}
      # madison pads the version column ("pkg |  2.6.2-1.1 | ..."): compare it trimmed.
      if apt-cache madison "$pkg" 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' | grep -qxF "$ver"; then
        args+=("$pin")
      else
        echo "note: $pkg $ver is no longer in the archive; installing its current version" >&2
        args+=("$pkg")
      fi
    done
    echo "installing ${args[*]} (apt-get)" >&2
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${args[@]}" >/dev/null \
      || failed+=("apt-get install ${args[*]}")
  fi
fi

# bentocache 1.6's dependencies need Node >= 20.19 (Debian 12's nodejs is 18.19: too old).
if ! want_app bentocache; then
  :
elif ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  failed+=("bentocache: node and npm (>= 20.19) are not installed")
elif ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)'; then
  failed+=("bentocache: node $(node --version) is older than 20.19, which its dependencies require")
elif ! cmp -s "$here/bentocache/package-lock.json" "$here/bentocache/node_modules/.installed-lock.json"; then
  # npm ci installs exactly the lock file; the copy beside node_modules says it is done.
  if (cd "$here/bentocache" && npm ci --no-audit --no-fund --loglevel=error); then
    cp "$here/bentocache/package-lock.json" "$here/bentocache/node_modules/.installed-lock.json"
  else
    failed+=("bentocache: npm ci")
  fi
fi

# dogpile.cache in a venv of its own; rebuilt when requirements.txt changes.
venv=$root/target/libraries/dogpile/venv
if want_app dogpile && ! cmp -s "$here/dogpile/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
  rm -rf "$venv"
  if python3 -m venv "$venv" \
    && "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/dogpile/requirements.txt"; then
    cp "$here/dogpile/requirements.txt" "$venv/requirements.txt"
  else
    failed+=("dogpile: python3 -m venv / pip install -r requirements.txt")
  fi
fi

if [ ${#failed[@]} -gt 0 ]; then
  printf 'not installed: %s\n' "${failed[@]}" >&2
  exit 3
fi
