package ingest

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/webhook"
)

// webhookClaims is what ingest reads of a LiveKit webhook token: the
// registered claims (iss names the signing key) and the body's sha256.
// livekit/protocol decodes the token into its whole ClaimGrants (room,
// video and SIP grants) and does it twice, once unverified for the key and
// once verified; a webhook needs neither grant, and one decode of these
// claims is most of what verification cost (docs/performance.md).
type webhookClaims struct {
	jwt.RegisteredClaims
	Sha256 string `json:"sha256,omitempty"`
}

// webhookTokenParser checks what livekit/protocol's
// APIKeyTokenVerifier.Verify checks, with the same library and options:
// HS256 only, a minute's leeway (its tokenLeeway), exp required. The issuer
// needs no WithIssuer: the secret is looked up by the token's own issuer.
var webhookTokenParser = jwt.NewParser(
	jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
	jwt.WithLeeway(time.Minute),
	jwt.WithExpirationRequired(),
)

// errKeyNotFound is the key function's error for an issuer without a secret.
var errKeyNotFound = errors.New("api key not found")

// verifyWebhookToken checks LiveKit's webhook token as livekit/protocol's
// webhook.Receive does (signed by a known key, unexpired within the
// verifier's leeway), without the body, in one parse: it returns the
// signing key and the body's sha256 the token vouches for. Refusal reasons
// are those of protocol's two steps (TestWebhookTokenAgreesWithProtocol,
// FuzzWebhookToken): a token that does not parse is bad_token, an issuer
// without a secret unknown_key, anything else the signature step refuses
// bad_signature.
func verifyWebhookToken(token string, keys auth.KeyProvider) (apiKey, sha string, err error) {
	if token == "" {
		return "", "", &authError{reason: refusedNoToken, err: webhook.ErrNoAuthHeader}
	}
	var claims webhookClaims
	keyLooked := false
	_, err = webhookTokenParser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) {
		keyLooked = true
		secret := keys.GetSecret(claims.Issuer)
		if secret == "" {
			return nil, errKeyNotFound
		}
		return []byte(secret), nil
	})
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenMalformed), !keyLooked && errors.Is(err, jwt.ErrTokenUnverifiable):
		// What protocol's unverified parse refuses: not a JWT, or an
		// algorithm it does not know.
		return "", "", &authError{reason: refusedBadToken, err: err}
	case errors.Is(err, errKeyNotFound), keys.GetSecret(claims.Issuer) == "":
		return "", "", &authError{reason: refusedUnknownKey, key: claims.Issuer, err: webhook.ErrSecretNotFound}
	default:
		return "", "", &authError{reason: refusedBadSignature, key: claims.Issuer, err: err}
	}
	if claims.Sha256 == "" {
		return "", "", &authError{reason: refusedBadChecksum, key: claims.Issuer, err: webhook.ErrInvalidChecksum}
	}
	return claims.Issuer, claims.Sha256, nil
}
