#!/bin/sh
# Makes deploy/secrets/ for compose.yaml: a random PostgreSQL password, a
# random password for spiderd's admin (user "admin": a node on 0.0.0.0
# refuses to serve without authentication), and the spiderd config drop-in
# holding both. Keeps existing files.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)/secrets
mkdir -p "$dir"
umask 077
if [ ! -f "$dir/postgres_password" ]; then
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/postgres_password"
fi
if [ ! -f "$dir/admin_password" ]; then
  head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/admin_password"
fi
if [ ! -f "$dir/store.conf" ]; then
  printf '[spiderd]\nstore = postgresql://spiderd:%s@postgres:5432/spiderd\n' \
    "$(cat "$dir/postgres_password")" >"$dir/store.conf"
  printf '\n[scrapyd]\nusername = admin\npassword = %s\n' \
    "$(cat "$dir/admin_password")" >>"$dir/store.conf"
fi
# read by the containers' own users (postgres, spiderd)
chmod 0644 "$dir/postgres_password" "$dir/store.conf"
echo "secrets in $dir (log in as admin with the password in $dir/admin_password)"
