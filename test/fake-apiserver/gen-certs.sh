#!/bin/sh
# Writes a throwaway PKI for the fake API server into DIR: ca.crt/ca.key, server.crt/key
# (SAN 127.0.0.1 and localhost), client.crt/key (CN topofit-test), and other-ca.crt (a CA
# that signed nothing here, for "wrong CA" tests).  Usage: gen-certs.sh DIR
set -eu
d=$1
mkdir -p "$d"
cd "$d"
q="-loglevel error"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=fake-apiserver-ca -keyout ca.key -out ca.crt 2>/dev/null
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=other-ca -keyout other-ca.key -out other-ca.crt 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
        -keyout server.key -out server.csr 2>/dev/null
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -extfile server.ext -out server.crt 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=topofit-test \
        -keyout client.key -out client.csr 2>/dev/null
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -out client.crt 2>/dev/null
rm -f server.csr client.csr server.ext ca.srl
