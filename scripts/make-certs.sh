#!/usr/bin/env bash
# make-certs.sh DIR [NAME]: a TEST certificate authority and one node certificate signed by it,
# for trying out cluster TLS (CAF's openssl.certificate / openssl.key / openssl.cafile).
#
#   DIR/ca.pem    the CA's certificate (give it to every node as openssl.cafile)
#   DIR/ca.key    the CA's private key (keep it to sign more node certificates, or delete it)
#   DIR/node.pem  the node's certificate: CN=NAME (default asyncrl-node),
#                 subjectAltName DNS:localhost,IP:127.0.0.1, extendedKeyUsage serverAuth,clientAuth
#   DIR/node.key  the node's private key (mode 600)
#
# These are TEST certificates: self-made CA, unencrypted keys, one year of validity, localhost
# names. Do not use them to protect anything real.
#
# Every run makes a NEW CA and overwrites the files in DIR. Running it twice into two
# directories gives two UNRELATED CAs: a node with the first directory's files refuses one with
# the second's (which is how to test a refused handshake). For several nodes of one cluster, run
# it once and share the directory (all nodes may use the same node certificate on one machine).
#
# Needs the openssl command-line tool. Verify with: openssl verify -CAfile DIR/ca.pem DIR/node.pem
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 || "$1" == "-h" || "$1" == "--help" ]]; then
  echo "usage: $0 DIR [NAME]   (NAME: the node certificate's CN, default asyncrl-node)" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "make-certs.sh: openssl not found" >&2; exit 1; }

dir=$1
name=${2:-asyncrl-node}
days=365
if [[ ! "$name" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
  echo "make-certs.sh: NAME must be letters, digits, '.', '_' or '-', not '$name'" >&2
  exit 2
fi
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Keys: EC P-256 (small and fast; CAF's OpenSSL context accepts it).
umask 077
openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/ca.key"
openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/node.key"
umask 022

# The CA: self-signed, allowed to sign certificates and nothing else.
cat >"$tmp/ca.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
x509_extensions = v3_ca
[dn]
CN = asyncrl test CA ($(date -u +%Y-%m-%dT%H:%M:%SZ) $$)
[v3_ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
openssl req -new -x509 -sha256 -days "$days" -config "$tmp/ca.cnf" -key "$tmp/ca.key" \
  -out "$tmp/ca.pem"

# The node: a request, then the CA's signature with the node's extensions.
cat >"$tmp/node.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
CN = $name
[v3_node]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyAgreement
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
EOF
openssl req -new -sha256 -config "$tmp/node.cnf" -key "$tmp/node.key" -out "$tmp/node.csr"
openssl x509 -req -sha256 -days "$days" -in "$tmp/node.csr" -CA "$tmp/ca.pem" \
  -CAkey "$tmp/ca.key" -set_serial "0x$(openssl rand -hex 16)" -extfile "$tmp/node.cnf" \
  -extensions v3_node -out "$tmp/node.pem" 2>/dev/null

openssl verify -CAfile "$tmp/ca.pem" "$tmp/node.pem" >/dev/null

# Only now replace what DIR held, so a failed run leaves the old files alone.
install -m 644 "$tmp/ca.pem" "$dir/ca.pem"
install -m 600 "$tmp/ca.key" "$dir/ca.key"
install -m 644 "$tmp/node.pem" "$dir/node.pem"
install -m 600 "$tmp/node.key" "$dir/node.key"

echo "make-certs.sh: wrote TEST certificates (valid $days days) to $dir:"
echo "  $dir/ca.pem    CA certificate ($(openssl x509 -in "$dir/ca.pem" -noout -subject))"
echo "  $dir/ca.key    CA private key (600)"
echo "  $dir/node.pem  node certificate (CN=$name, DNS:localhost, IP:127.0.0.1)"
echo "  $dir/node.key  node private key (600)"
