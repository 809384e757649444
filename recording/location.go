package recording

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Location is an object's place in a store, parsed from an egress
// FileInfo.location URL (docs/formats.md, "Egress locations") or an s3:// URL.
type Location struct {
	Scheme   string `json:"scheme"`             // "s3" or "file"
	Bucket   string `json:"bucket,omitempty"`   // S3 bucket
	Key      string `json:"key"`                // object key (S3) or path (file)
	Region   string `json:"region,omitempty"`   // from a regional AWS host, if any
	Endpoint string `json:"endpoint,omitempty"` // custom endpoint host for path-style URLs
}

// LocationParser turns location URLs into bucket + key. Endpoint (a host,
// optionally with port, or a URL) is the custom S3 endpoint in use, if any: it tells
// path-style (endpoint/bucket/key) from virtual-hosted (bucket.endpoint/key)
// URLs on hosts that are not AWS's.
type LocationParser struct {
	Endpoint       string
	ForcePathStyle bool
}

var (
	// bucket.s3.amazonaws.com, bucket.s3.us-east-2.amazonaws.com, bucket.s3-us-west-2.amazonaws.com
	awsVirtualRE = regexp.MustCompile(`^(.+)\.s3(?:[.-]([a-z0-9-]+))?\.amazonaws\.com(?:\.cn)?$`)
	// s3.amazonaws.com, s3.eu-west-1.amazonaws.com, s3-eu-west-1.amazonaws.com
	awsPathRE = regexp.MustCompile(`^s3(?:[.-]([a-z0-9-]+))?\.amazonaws\.com(?:\.cn)?$`)
	// livekit/storage with an endpoint that has a scheme: https://bucket.https://host/key
	malformedRE = regexp.MustCompile(`^(https?)://([^/]+)\.(https?)://(.*)$`)
)

// ErrLocation is wrapped by every location parsing error.
var ErrLocation = errors.New("unsupported location")

// Parse parses one location URL. The query string (presigned URLs) is dropped
// and the path is URL-decoded.
func (lp LocationParser) Parse(raw string) (Location, error) {
	fail := func(format string, a ...any) (Location, error) {
		return Location{}, &ParseError{Part: PartLocation, Item: -1, Offset: -1,
			Err: fmt.Errorf("%w: %s: %s", ErrLocation, truncate(raw, 200), fmt.Sprintf(format, a...))}
	}
	s := strings.TrimSpace(raw)
	var malformedBucket string
	if m := malformedRE.FindStringSubmatch(s); m != nil {
		malformedBucket = m[2]
		s = m[3] + "://" + m[4]
	}
	u, err := url.Parse(s)
	if err != nil {
		return fail("not a URL: %v", err)
	}
	path := u.Path // already decoded
	switch u.Scheme {
	case "s3":
		key := strings.TrimPrefix(path, "/")
		if u.Host == "" || key == "" {
			return fail("want s3://bucket/key")
		}
		return Location{Scheme: "s3", Bucket: u.Host, Key: key}, nil
	case "file":
		if path == "" {
			return fail("empty file path")
		}
		return Location{Scheme: "file", Key: path}, nil
	case "http", "https":
	default:
		return fail("scheme %q is not s3, file, http or https", u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	hostPort := strings.ToLower(u.Host)
	if malformedBucket != "" {
		return virtual(malformedBucket, path, "", hostPort, fail)
	}
	if m := awsVirtualRE.FindStringSubmatch(host); m != nil {
		return virtual(m[1], path, m[2], "", fail)
	}
	if m := awsPathRE.FindStringSubmatch(host); m != nil {
		return pathStyle(path, m[1], "", fail)
	}
	if strings.HasSuffix(host, ".blob.core.windows.net") {
		return fail("Azure Blob storage is not S3")
	}
	if b, ok := strings.CutSuffix(host, ".storage.googleapis.com"); ok {
		return virtual(b, path, "", "storage.googleapis.com", fail)
	}
	if ep := endpointHost(strings.ToLower(lp.Endpoint)); ep != "" {
		switch {
		case hostPort == ep || host == ep:
			return pathStyle(path, "", hostPort, fail)
		case strings.HasSuffix(hostPort, "."+ep) || strings.HasSuffix(host, "."+ep):
			return virtual(strings.TrimSuffix(strings.TrimSuffix(hostPort, "."+ep), "."+ep), path, "", ep, fail)
		}
	}
	// An unknown host: path-style when forced, or when the host cannot carry a
	// bucket label (an IP, a single label like "minio", or a port is given).
	if lp.ForcePathStyle || net.ParseIP(host) != nil || !strings.Contains(host, ".") || u.Port() != "" {
		return pathStyle(path, "", hostPort, fail)
	}
	// Otherwise livekit/storage's default form: https://{bucket}.{endpoint}/{key}.
	b, ep, _ := strings.Cut(hostPort, ".")
	return virtual(b, path, "", ep, fail)
}

func virtual(bucket, path, region, endpoint string, fail func(string, ...any) (Location, error)) (Location, error) {
	key := strings.TrimPrefix(path, "/")
	if bucket == "" || key == "" {
		return fail("no bucket or key in a virtual-hosted URL")
	}
	return Location{Scheme: "s3", Bucket: bucket, Key: key, Region: region, Endpoint: endpoint}, nil
}

func pathStyle(path, region, endpoint string, fail func(string, ...any) (Location, error)) (Location, error) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if bucket == "" || key == "" {
		return fail("no bucket or key in a path-style URL")
	}
	return Location{Scheme: "s3", Bucket: bucket, Key: key, Region: region, Endpoint: endpoint}, nil
}

// endpointHost strips the scheme from an endpoint URL ("http://minio:9000" → "minio:9000").
func endpointHost(endpoint string) string {
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		endpoint = rest
	}
	return strings.TrimSuffix(endpoint, "/")
}
