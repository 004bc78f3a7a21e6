#!/bin/sh
# Makes deploy/secrets/ for compose.yaml: a random PostgreSQL password, a
# random password for spiderd's admin (user "admin": a node on 0.0.0.0
# refuses to serve without authentication), and the spiderd config drop-in
# holding both; random keys for the S3 store (SeaweedFS): its admin's (in
# s3_admin_credentials, used to make the bucket) and spiderd's (in
# object_store_credentials, allowed the bucket "spiderd" only), and the
# store's own list of both (seaweedfs_s3.json). Keeps existing files.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)/secrets
mkdir -p "$dir"
umask 077
rand() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
if [ ! -f "$dir/postgres_password" ]; then
  rand 24 >"$dir/postgres_password"
fi
if [ ! -f "$dir/admin_password" ]; then
  rand 18 >"$dir/admin_password"
fi
if [ ! -f "$dir/store.conf" ]; then
  printf '[spiderd]\nstore = postgresql://spiderd:%s@postgres:5432/spiderd\n' \
    "$(cat "$dir/postgres_password")" >"$dir/store.conf"
  printf '\n[scrapyd]\nusername = admin\npassword = %s\n' \
    "$(cat "$dir/admin_password")" >>"$dir/store.conf"
fi
if [ ! -f "$dir/seaweedfs_s3.json" ]; then
  admin_key=admin$(rand 8) admin_secret=$(rand 20)
  key=spiderd$(rand 8) secret=$(rand 20)
  printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
    "$admin_key" "$admin_secret" >"$dir/s3_admin_credentials"
  printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
    "$key" "$secret" >"$dir/object_store_credentials"
  cat >"$dir/seaweedfs_s3.json" <<JSON
{
  "identities": [
    {
      "name": "admin",
      "credentials": [{"accessKey": "$admin_key", "secretKey": "$admin_secret"}],
      "actions": ["Admin", "Read", "Write", "List", "Tagging"]
    },
    {
      "name": "spiderd",
      "credentials": [{"accessKey": "$key", "secretKey": "$secret"}],
      "actions": ["Read:spiderd", "Write:spiderd", "List:spiderd"]
    }
  ]
}
JSON
fi
# read by the containers' own users (postgres, spiderd, the S3 store)
chmod 0644 "$dir/postgres_password" "$dir/store.conf" "$dir/seaweedfs_s3.json" \
  "$dir/s3_admin_credentials" "$dir/object_store_credentials"
echo "secrets in $dir (log in as admin with the password in $dir/admin_password)"
