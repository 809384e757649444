package ingest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/webhook"
)

const (
	tokKey    = "APItoken"
	tokSecret = "token-secret-0123456789abcdef0123"
)

// protocolVerify is how ingest verified a webhook token before the one-parse
// verifier: livekit/protocol's two steps, ParseAPIToken and Verify. The new
// verifier must give the same answer (the refusal reason, key and sha256).
func protocolVerify(token string, keys auth.KeyProvider) (apiKey, sha string, err error) {
	if token == "" {
		return "", "", &authError{reason: refusedNoToken, err: webhook.ErrNoAuthHeader}
	}
	v, err := auth.ParseAPIToken(token)
	if err != nil {
		return "", "", &authError{reason: refusedBadToken, err: err}
	}
	secret := keys.GetSecret(v.APIKey())
	if secret == "" {
		return "", "", &authError{reason: refusedUnknownKey, key: v.APIKey(), err: webhook.ErrSecretNotFound}
	}
	_, claims, err := v.Verify(secret)
	if err != nil {
		return "", "", &authError{reason: refusedBadSignature, key: v.APIKey(), err: err}
	}
	if claims.Sha256 == "" {
		return "", "", &authError{reason: refusedBadChecksum, key: v.APIKey(), err: webhook.ErrInvalidChecksum}
	}
	return v.APIKey(), claims.Sha256, nil
}

// rawToken builds a JWT from its header and claims JSON, signed with secret
// by HS256 (whatever the header says), or with sig when secret is "".
func rawToken(header, claims, secret, sig string) string {
	enc := base64.RawURLEncoding
	text := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	if secret != "" {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(text))
		sig = enc.EncodeToString(m.Sum(nil))
	}
	return text + "." + sig
}

type tokenAnswer struct{ reason, key, sha string }

func answer(key, sha string, err error) tokenAnswer {
	if err == nil {
		return tokenAnswer{"", key, sha}
	}
	var ae *authError
	if !errors.As(err, &ae) {
		return tokenAnswer{"not an authError: " + err.Error(), "", ""}
	}
	return tokenAnswer{ae.reason, ae.key, ""}
}

// grantsDecode reports whether claims decode into protocol's whole claims
// (its grants too): protocol refuses a signed token whose grants do not
// decode, the webhook verifier reads no grant.
func grantsDecode(claims string) bool {
	var full struct {
		jwt.RegisteredClaims
		auth.ClaimGrants
	}
	return json.Unmarshal([]byte(claims), &full) == nil
}

func TestWebhookTokenAgreesWithProtocol(t *testing.T) {
	keys := auth.NewSimpleKeyProvider(tokKey, tokSecret)
	now := time.Now().Unix()
	hs256 := `{"alg":"HS256","typ":"JWT"}`
	claims := func(extra string) string {
		return fmt.Sprintf(`{"iss":%q,"exp":%d,"nbf":%d%s}`, tokKey, now+300, now-10, extra)
	}
	sha := `,"sha256":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="`
	signed, err := auth.NewAccessToken(tokKey, tokSecret).SetValidFor(5 * time.Minute).SetSha256("c2hh").ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, token string
		want        string // the refusal reason, "" for accepted
	}{
		{"protocol's own token", signed, ""},
		{"valid", rawToken(hs256, claims(sha), tokSecret, ""), ""},
		{"empty", "", refusedNoToken},
		{"not a JWT", "abc", refusedBadToken},
		{"two parts", "a.b", refusedBadToken},
		{"bad base64 claims", "eyJhbGciOiJIUzI1NiJ9.!!!.c2ln", refusedBadToken},
		{"claims not JSON", rawToken(hs256, `{"iss":`, tokSecret, ""), refusedBadToken},
		{"unknown alg", rawToken(`{"alg":"XX1"}`, claims(sha), tokSecret, ""), refusedBadToken},
		{"alg none", rawToken(`{"alg":"none"}`, claims(sha), "", ""), refusedBadSignature},
		{"alg HS512", rawToken(`{"alg":"HS512"}`, claims(sha), tokSecret, ""), refusedBadSignature},
		{"alg none, unknown key", rawToken(`{"alg":"none"}`, `{"iss":"APInobody","exp":9999999999}`, "", ""), refusedUnknownKey},
		{"unknown key", rawToken(hs256, `{"iss":"APInobody","exp":9999999999`+sha+`}`, tokSecret, ""), refusedUnknownKey},
		{"no issuer", rawToken(hs256, `{"exp":9999999999`+sha+`}`, tokSecret, ""), refusedUnknownKey},
		{"wrong secret", rawToken(hs256, claims(sha), "another-secret-0123456789abcdef", ""), refusedBadSignature},
		{"no signature", rawToken(hs256, claims(sha), "", ""), refusedBadSignature},
		{"expired", rawToken(hs256, fmt.Sprintf(`{"iss":%q,"exp":%d%s}`, tokKey, now-120, sha), tokSecret, ""), refusedBadSignature},
		{"expired within the leeway", rawToken(hs256, fmt.Sprintf(`{"iss":%q,"exp":%d%s}`, tokKey, now-30, sha), tokSecret, ""), ""},
		{"not yet valid", rawToken(hs256, fmt.Sprintf(`{"iss":%q,"exp":%d,"nbf":%d%s}`, tokKey, now+900, now+300, sha), tokSecret, ""), refusedBadSignature},
		{"no exp", rawToken(hs256, fmt.Sprintf(`{"iss":%q%s}`, tokKey, sha), tokSecret, ""), refusedBadSignature},
		{"exp a string", rawToken(hs256, fmt.Sprintf(`{"iss":%q,"exp":"soon"%s}`, tokKey, sha), tokSecret, ""), refusedBadToken},
		{"no sha256", rawToken(hs256, claims(""), tokSecret, ""), refusedBadChecksum},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := answer(verifyWebhookToken(c.token, keys))
			want := answer(protocolVerify(c.token, keys))
			if got != want {
				t.Fatalf("one-parse verifier %+v, livekit/protocol %+v", got, want)
			}
			if got.reason != c.want {
				t.Fatalf("reason %q, want %q", got.reason, c.want)
			}
		})
	}
}

// FuzzWebhookToken: on any header and claims, signed with the configured
// secret or not, the one-parse verifier answers as livekit/protocol's two
// steps do. The one difference allowed: a signed token whose grants do not
// decode (protocol decodes every grant; a webhook needs none) is judged on
// its sha256 claim alone.
func FuzzWebhookToken(f *testing.F) {
	now := time.Now().Unix()
	f.Add(`{"alg":"HS256","typ":"JWT"}`, fmt.Sprintf(`{"iss":%q,"exp":%d,"sha256":"x"}`, tokKey, now+300), true, "")
	f.Add(`{"alg":"HS256"}`, fmt.Sprintf(`{"iss":%q,"exp":%d,"nbf":%d,"sha256":"x","video":{"room":"r"}}`, tokKey, now+300, now), true, "")
	f.Add(`{"alg":"none"}`, fmt.Sprintf(`{"iss":%q,"exp":%d}`, tokKey, now-300), false, "")
	f.Add(`{"alg":"HS256"}`, `{"iss":"APInobody","exp":1}`, false, "c2ln")
	f.Add(`{"alg":"HS256"}`, fmt.Sprintf(`{"iss":%q,"exp":%d,"video":5}`, tokKey, now+300), true, "")
	f.Add(`not json`, `{}`, true, "")
	keys := auth.NewSimpleKeyProvider(tokKey, tokSecret)
	f.Fuzz(func(t *testing.T, header, claims string, sign bool, sig string) {
		secret := ""
		if sign {
			secret = tokSecret
		}
		token := rawToken(header, claims, secret, sig)
		got := answer(verifyWebhookToken(token, keys))
		want := answer(protocolVerify(token, keys))
		if got == want {
			return
		}
		if (got.reason == "" || got.reason == refusedBadChecksum) && want.reason == refusedBadSignature && !grantsDecode(claims) {
			return
		}
		t.Fatalf("header %q claims %q: one-parse verifier %+v, livekit/protocol %+v", header, claims, got, want)
	})
}
