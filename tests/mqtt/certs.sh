#!/usr/bin/env bash
# Makes the certificates the MQTT tests use, in folder $1 (OpenSSL's command line):
#   ca.pem             the test CA (signs everything below)
#   other-ca.pem       a CA that signed nothing here (a "wrong CA")
#   server.pem/.key    the broker, for 127.0.0.1 and localhost, valid now
#   expired.pem/.key   the broker, expired in 2021
#   client.pem/.key    a robot's client certificate (CN robot1)
set -euo pipefail
out=$1
mkdir -p "$out"
cd "$out"
q() { "$@" >/dev/null 2>&1 || { echo "certs.sh: failed: $*" >&2; "$@"; exit 1; }; }
key() { q openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

key ca.key
q openssl req -x509 -new -key ca.key -sha256 -days 30 -subj "/CN=jetdetect test CA" -out ca.pem
key other-ca.key
q openssl req -x509 -new -key other-ca.key -sha256 -days 30 -subj "/CN=some other CA" -out other-ca.pem

cat >ext.cnf <<'CNF'
[server]
basicConstraints = CA:FALSE
keyUsage = digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
[client]
basicConstraints = CA:FALSE
keyUsage = digitalSignature
extendedKeyUsage = clientAuth
CNF

key server.key
q openssl req -new -key server.key -subj "/CN=localhost" -out server.csr
q openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days 30 \
    -extfile ext.cnf -extensions server -out server.pem

key client.key
q openssl req -new -key client.key -subj "/CN=robot1" -out client.csr
q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days 30 \
    -extfile ext.cnf -extensions client -out client.pem

# An expired server certificate: `openssl ca` takes explicit start and end dates.
mkdir -p ca.db
: >ca.db/index.txt
echo 1000 >ca.db/serial
cat >ca.cnf <<CNF
[ca]
default_ca = test
[test]
dir = ca.db
database = ca.db/index.txt
serial = ca.db/serial
new_certs_dir = ca.db
certificate = ca.pem
private_key = ca.key
default_md = sha256
policy = any
copy_extensions = none
[any]
commonName = supplied
CNF
key expired.key
q openssl req -new -key expired.key -subj "/CN=localhost" -out expired.csr
q openssl ca -batch -config ca.cnf -notext -startdate 20200101000000Z -enddate 20210101000000Z \
    -extfile ext.cnf -extensions server -in expired.csr -out expired.pem
chmod 644 ./*.pem ./*.key
