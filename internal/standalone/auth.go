package standalone

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
)

// AdminUser is who the standalone token authenticates as.
const AdminUser = "standalone-admin"

// LoadOrCreateToken returns the bearer token kept in dir, creating a random
// one the first time. Keeping it makes a kubeconfig written by an earlier
// run work after a restart.
func LoadOrCreateToken(dir string) (string, error) {
	path := filepath.Join(dir, "token")
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if token := strings.TrimSpace(string(data)); token != "" {
			return token, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("can't read the standalone token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("can't generate a token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("can't write the standalone token: %w", err)
	}
	return token, nil
}

// Authenticator accepts exactly one bearer token, as the standalone
// administrator. Every other request is unauthenticated and, since there is
// no anonymous access, refused with 401.
func Authenticator(token string) authenticator.Request {
	tokens := tokenfile.New(map[string]*user.DefaultInfo{
		token: {Name: AdminUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}},
	})
	return bearertoken.New(tokens)
}

// Authorizer lets the privileged group (the standalone administrator and
// the server's own loopback client) do everything. It has no opinion on
// anybody else, which the server answers with 403.
func Authorizer() authorizer.Authorizer {
	return authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)
}
