package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
)

// S3 keeps recordings in an S3 bucket (or any S3-compatible store).
// Keys are full object keys; the layout adds the configured prefix.
type S3 struct {
	bucket  string
	client  *s3.Client
	tm      *transfermanager.Client
	timeout time.Duration
}

// NewS3 builds the client from the default AWS credential chain (env,
// shared config, web identity for IRSA) with the configured region, endpoint,
// path style, retries (standard: backoff on 5xx and throttling) and a
// per-request timeout. It does no network I/O.
func NewS3(ctx context.Context, c config.S3) (*S3, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = c.MaxAttempts })
		}),
	}
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1" // S3-compatible stores ignore it; AWS needs one
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.UsePathStyle = c.ForcePathStyle
		// Objects uploaded in parts carry composite checksums the SDK cannot
		// validate on GET; it would log a warning on every such read.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	tm := transfermanager.New(client, func(o *transfermanager.Options) {
		// Bounded memory per upload: at most Concurrency parts of PartSizeBytes in flight.
		o.PartSizeBytes = 8 << 20
		o.Concurrency = 2
	})
	return &S3{bucket: c.Bucket, client: client, tm: tm, timeout: c.RequestTimeout}, nil
}

// Location implements Writer.
func (s *S3) Location(dir string) string { return "s3://" + s.bucket + "/" + dir }

// Identity names the store: its bucket (keys carry the prefix).
func (s *S3) Identity() string { return "s3://" + s.bucket }

// Open implements recording.ObjectReader: it checks the object's length
// before reading and enforces it while streaming. The request timeout covers
// the response headers; the body may stream for longer.
func (s *S3) Open(ctx context.Context, key string, maxBytes int64) (io.ReadCloser, error) {
	return s.OpenBucket(ctx, s.bucket, key, maxBytes)
}

// OpenBucket is Open on another bucket (egress locations, inspect s3://…).
func (s *S3) OpenBucket(ctx context.Context, bucket, key string, maxBytes int64) (io.ReadCloser, error) {
	if bucket == "" {
		bucket = s.bucket
	}
	ctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(s.timeout, cancel)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	timer.Stop()
	if err != nil {
		cancel()
		return nil, classifyS3("get", bucket, key, err)
	}
	if out.ContentLength != nil && *out.ContentLength > maxBytes {
		_ = out.Body.Close()
		cancel()
		return nil, fmt.Errorf("get s3://%s/%s: %d bytes: %w", bucket, key, *out.ContentLength, recording.ErrLimit)
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	return readCloser{Reader: recording.LimitReader(out.Body, maxBytes), Closer: closeFunc(func() error {
		defer cancel()
		return out.Body.Close()
	}), size: size}, nil
}

// List implements listing for the locator and inspect: every key under prefix.
func (s *S3) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		page, err := p.NextPage(rctx)
		cancel()
		if err != nil {
			return nil, classifyS3("list", s.bucket, prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

// Begin implements Writer. Objects go straight to their final keys,
// header last: a reader treats a session as present only once its header
// exists, so a half-written upload is never seen as one. Abort deletes what
// was written.
func (s *S3) Begin(_ context.Context, dir string) (Upload, error) {
	if err := checkKey(strings.TrimSuffix(dir, "/")); err != nil {
		return nil, err
	}
	return &s3Upload{s: s, dir: dir}, nil
}

type s3Upload struct {
	s       *S3
	dir     string
	written []string
	header  []byte
	done    bool
}

func (u *s3Upload) Write(ctx context.Context, name string, r io.Reader, limit int64) (int64, error) {
	cr := &countReader{r: recording.LimitReader(r, limit)}
	if name == recording.ObjectHeader {
		// Held back until Commit: the header is small (limit-checked) and goes last.
		b, err := io.ReadAll(cr)
		if err != nil {
			return 0, err
		}
		u.header = b
		return int64(len(b)), nil
	}
	key := u.dir + name
	_, err := u.s.tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String(u.s.bucket), Key: aws.String(key), Body: cr})
	if err != nil {
		if cr.err != nil { // the source failed (limit, client gone), not S3
			return cr.n, cr.err
		}
		return cr.n, classifyS3("put", u.s.bucket, key, err)
	}
	u.written = append(u.written, key)
	return cr.n, nil
}

// countReader counts bytes and remembers the source's own error, so a
// failed upload can be blamed on the right side.
type countReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

func (u *s3Upload) Commit(ctx context.Context) error {
	if u.header != nil {
		key := u.dir + recording.ObjectHeader
		rctx, cancel := context.WithTimeout(ctx, u.s.timeout)
		defer cancel()
		_, err := u.s.client.PutObject(rctx, &s3.PutObjectInput{
			Bucket: aws.String(u.s.bucket), Key: aws.String(key),
			Body: strings.NewReader(string(u.header)), ContentLength: aws.Int64(int64(len(u.header))),
			ContentType: aws.String("application/protobuf"),
		})
		if err != nil {
			return classifyS3("put", u.s.bucket, key, err)
		}
	}
	u.done = true
	return nil
}

func (u *s3Upload) Abort(ctx context.Context) error {
	if u.done {
		return nil
	}
	u.done = true
	var errs []error
	for _, key := range u.written {
		rctx, cancel := context.WithTimeout(ctx, u.s.timeout)
		_, err := u.s.client.DeleteObject(rctx, &s3.DeleteObjectInput{Bucket: aws.String(u.s.bucket), Key: aws.String(key)})
		cancel()
		if err != nil {
			errs = append(errs, classifyS3("delete", u.s.bucket, key, err))
		}
	}
	return errors.Join(errs...)
}

// classifyS3 wraps an S3 error: 404 → ErrNotFound; other 4xx →
// ErrPermanent; the rest stays transient.
func classifyS3(op, bucket, key string, err error) error {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var nsb *types.NoSuchBucket
	var re *awshttp.ResponseError
	var ae smithy.APIError
	where := fmt.Sprintf("%s s3://%s/%s", op, bucket, key)
	switch {
	case errors.As(err, &nsk) || errors.As(err, &nf):
		return fmt.Errorf("%s: %w", where, ErrNotFound)
	case errors.As(err, &nsb):
		return fmt.Errorf("%s: no such bucket: %w", where, ErrPermanent)
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound:
		return fmt.Errorf("%s: %w", where, ErrNotFound)
	case errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 &&
		re.HTTPStatusCode() != http.StatusTooManyRequests && re.HTTPStatusCode() != http.StatusRequestTimeout:
		code := ""
		if errors.As(err, &ae) {
			code = ae.ErrorCode() + ": "
		}
		return fmt.Errorf("%s: %s%w (HTTP %d)", where, code, ErrPermanent, re.HTTPStatusCode())
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", where, err) // our own shutdown, not the store
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: timeout: %w: %w", where, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w: %w", where, ErrUnavailable, err)
}

// Delete removes an object; S3 answers a missing key with success too.
func (s *S3) Delete(ctx context.Context, key string) error {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.client.DeleteObject(rctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}); err != nil {
		return classifyS3("delete", s.bucket, key, err)
	}
	return nil
}

// Versioning says whether the bucket keeps older versions of what is
// deleted (its versioning is Enabled or Suspended): lkscore forget then
// reports that a deleted object's earlier versions remain.
func (s *S3) Versioning(ctx context.Context) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.GetBucketVersioning(rctx, &s3.GetBucketVersioningInput{Bucket: aws.String(s.bucket)})
	if err != nil {
		return "", classifyS3("get versioning", s.bucket, "", err)
	}
	return string(out.Status), nil
}

// VersionsLeft is what DeleteVersions could not delete: each version (or
// delete marker) by key and version id, with why.
type VersionsLeft struct {
	Key, VersionID, Err string
}

// DeleteVersions deletes every version and delete marker of the objects
// under prefix (in a bucket with versioning, a plain delete only adds a
// marker and keeps the bytes). exact limits it to the key prefix itself.
// It returns how many it deleted and each it could not; err is a listing
// that failed (the versions not listed are then unknown).
func (s *S3) DeleteVersions(ctx context.Context, prefix string, exact bool) (int, []VersionsLeft, error) {
	type version struct{ key, id string }
	var all []version
	p := s3.NewListObjectVersionsPaginator(s.client, &s3.ListObjectVersionsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		page, err := p.NextPage(rctx)
		cancel()
		if err != nil {
			return 0, nil, classifyS3("list versions", s.bucket, prefix, err)
		}
		for _, v := range page.Versions {
			all = append(all, version{aws.ToString(v.Key), aws.ToString(v.VersionId)})
		}
		for _, m := range page.DeleteMarkers {
			all = append(all, version{aws.ToString(m.Key), aws.ToString(m.VersionId)})
		}
	}
	removed := 0
	var left []VersionsLeft
	for _, v := range all {
		if exact && v.key != prefix {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		in := &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(v.key)}
		if v.id != "" { // "null": the version written while versioning was off
			in.VersionId = aws.String(v.id)
		}
		_, err := s.client.DeleteObject(rctx, in)
		cancel()
		if err != nil {
			left = append(left, VersionsLeft{Key: v.key, VersionID: v.id, Err: classifyS3("delete version", s.bucket, v.key, err).Error()})
			continue
		}
		removed++
	}
	return removed, left, nil
}
