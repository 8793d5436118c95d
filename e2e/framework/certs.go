package framework

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// CA is a certificate authority made for one test stack.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertFile is the PEM file of Cert.
	CertFile string
}

// CertKey is a PEM certificate and key on disk.
type CertKey struct {
	CertFile, KeyFile string
}

// Certs are every CA, certificate and key of a stack: nothing is shared
// between stacks or taken from the machine.
type Certs struct {
	dir string
	// ServingCA signs every serving certificate.
	ServingCA *CA
	// ClientCA signs the client certificates kube-apiserver accepts.
	ClientCA *CA
	// FrontProxyCA signs the aggregator's client certificate, the only one
	// aggregated servers accept identity headers from.
	FrontProxyCA *CA

	KubeAPIServerServing CertKey
	CompositeServing     CertKey
	FrontProxyClient     CertKey
	// ServiceAccountKey signs and verifies service-account tokens.
	ServiceAccountKey, ServiceAccountPub string
}

// FrontProxyClientName is the CN kube-apiserver's aggregator presents and
// the only name aggregated servers accept identity headers from.
const FrontProxyClientName = "front-proxy-client"

// NewCerts generates a stack's PKI in dir. compositeDNS are the names the
// aggregated server's serving certificate carries.
func NewCerts(dir string, compositeDNS []string) (*Certs, error) {
	c := &Certs{dir: dir}
	var err error
	if c.ServingCA, err = c.newCA("serving-ca"); err != nil {
		return nil, err
	}
	if c.ClientCA, err = c.newCA("client-ca"); err != nil {
		return nil, err
	}
	if c.FrontProxyCA, err = c.newCA("front-proxy-ca"); err != nil {
		return nil, err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	if c.KubeAPIServerServing, err = c.Issue(c.ServingCA, "kube-apiserver", nil,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, loopback, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if c.CompositeServing, err = c.Issue(c.ServingCA, "composite-apiserver", nil,
		append([]string{"localhost"}, compositeDNS...), loopback, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if c.FrontProxyClient, err = c.Issue(c.FrontProxyCA, FrontProxyClientName, nil, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	c.ServiceAccountKey = filepath.Join(dir, "sa.key")
	c.ServiceAccountPub = filepath.Join(dir, "sa.pub")
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return nil, err
	}
	pubPEM, err := encodePublicKeyPEM(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.ServiceAccountKey, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.ServiceAccountPub, pubPEM, 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Certs) newCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: name}, key)
	if err != nil {
		return nil, fmt.Errorf("can't make CA %s: %w", name, err)
	}
	ca := &CA{Cert: cert, Key: key, CertFile: filepath.Join(c.dir, name+".crt")}
	if err := os.WriteFile(ca.CertFile, pemEncode("CERTIFICATE", cert.Raw), 0o600); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue signs a certificate with ca for usages (an etcd member's is both
// server and client: its peers connect to each other) and writes it and its
// key under the stack's directory, named after cn.
func (c *Certs) Issue(ca *CA, cn string, orgs, dnsNames []string, ips []net.IP, usages ...x509.ExtKeyUsage) (CertKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return CertKey{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return CertKey{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return CertKey{}, fmt.Errorf("can't sign a certificate for %s: %w", cn, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return CertKey{}, err
	}
	base := filepath.Join(c.dir, fmt.Sprintf("%s-%s", filepath.Base(ca.CertFile[:len(ca.CertFile)-len(".crt")]), sanitize(cn)))
	ck := CertKey{CertFile: base + ".crt", KeyFile: base + ".key"}
	if err := os.WriteFile(ck.CertFile, pemEncode("CERTIFICATE", der), 0o600); err != nil {
		return CertKey{}, err
	}
	if err := os.WriteFile(ck.KeyFile, keyPEM, 0o600); err != nil {
		return CertKey{}, err
	}
	return ck, nil
}

func sanitize(s string) string {
	out := []rune(s)
	for i, r := range out {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			out[i] = '_'
		}
	}
	return string(out)
}

func encodePublicKeyPEM(pub *rsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pemEncode("PUBLIC KEY", der), nil
}

func pemEncode(blockType string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
}
