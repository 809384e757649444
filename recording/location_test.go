package recording

import (
	"errors"
	"testing"
)

func TestParseLocation(t *testing.T) {
	tests := []struct {
		name, in       string
		lp             LocationParser
		bucket, key    string
		region, scheme string
	}{
		{"virtual-hosted default", "https://my-bucket.s3.amazonaws.com/recordings/room-2026-11-29T120000.ogg", LocationParser{}, "my-bucket", "recordings/room-2026-11-29T120000.ogg", "", "s3"},
		{"regional dot", "https://my-bucket.s3.eu-west-1.amazonaws.com/a/b.ogg", LocationParser{}, "my-bucket", "a/b.ogg", "eu-west-1", "s3"},
		{"regional dash", "https://my-bucket.s3-us-west-2.amazonaws.com/a/b.ogg", LocationParser{}, "my-bucket", "a/b.ogg", "us-west-2", "s3"},
		{"dotted bucket", "https://my.dotted.bucket.s3.amazonaws.com/k", LocationParser{}, "my.dotted.bucket", "k", "", "s3"},
		{"AWS path-style", "https://s3.amazonaws.com/my-bucket/a/b.ogg", LocationParser{}, "my-bucket", "a/b.ogg", "", "s3"},
		{"AWS regional path-style", "https://s3.eu-central-1.amazonaws.com/my-bucket/a/b.ogg", LocationParser{}, "my-bucket", "a/b.ogg", "eu-central-1", "s3"},
		{"custom path-style with port", "http://minio:9000/bucket/rec/x.ogg", LocationParser{}, "bucket", "rec/x.ogg", "", "s3"},
		{"custom path-style configured", "https://storage.example.com/bucket/rec/x.ogg", LocationParser{Endpoint: "storage.example.com"}, "bucket", "rec/x.ogg", "", "s3"},
		{"custom virtual-hosted configured", "https://bucket.storage.example.com/rec/x.ogg", LocationParser{Endpoint: "storage.example.com"}, "bucket", "rec/x.ogg", "", "s3"},
		{"custom virtual-hosted default", "https://bucket.r2.example.net/rec/x.ogg", LocationParser{}, "bucket", "rec/x.ogg", "", "s3"},
		{"forced path-style", "https://storage.example.com/bucket/x.ogg", LocationParser{ForcePathStyle: true}, "bucket", "x.ogg", "", "s3"},
		{"s3 URL", "s3://bucket/some/key.ogg", LocationParser{}, "bucket", "some/key.ogg", "", "s3"},
		{"presigned", "https://my-bucket.s3.amazonaws.com/a/b.ogg?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc", LocationParser{}, "my-bucket", "a/b.ogg", "", "s3"},
		{"escaped key", "https://my-bucket.s3.amazonaws.com/rooms/my%20room/a%2Bb.ogg", LocationParser{}, "my-bucket", "rooms/my room/a+b.ogg", "", "s3"},
		{"malformed endpoint with scheme", "https://bucket.https://minio.example.com/rec/x.ogg", LocationParser{}, "bucket", "rec/x.ogg", "", "s3"},
		{"GCS", "https://bucket.storage.googleapis.com/rec/x.ogg", LocationParser{}, "bucket", "rec/x.ogg", "", "s3"},
		{"IP endpoint", "http://127.0.0.1:9000/bucket/x.ogg", LocationParser{}, "bucket", "x.ogg", "", "s3"},
		{"local file", "file:///var/lib/egress/x.ogg", LocationParser{}, "", "/var/lib/egress/x.ogg", "", "file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.lp.Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if l.Bucket != tc.bucket || l.Key != tc.key || l.Region != tc.region || l.Scheme != tc.scheme {
				t.Fatalf("got %+v", l)
			}
		})
	}
	for _, bad := range []string{"", "ftp://x/y", "s3://bucket", "s3:///key", "https://s3.amazonaws.com/bucket-only", "https://acct.blob.core.windows.net/c/k", "://nope", "https://bucket.s3.amazonaws.com/"} {
		t.Run("bad "+bad, func(t *testing.T) {
			_, err := LocationParser{}.Parse(bad)
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrLocation) || pe.Part != PartLocation {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func FuzzParseLocation(f *testing.F) {
	for _, s := range []string{"https://my-bucket.s3.amazonaws.com/k", "s3://b/k", "http://minio:9000/b/k", "https://b.https://h/k", "https://s3.eu-west-1.amazonaws.com/b/k?X-Amz-Signature=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		l, err := LocationParser{}.Parse(in)
		if err != nil {
			if !errors.Is(err, ErrLocation) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if l.Key == "" || (l.Scheme == "s3" && l.Bucket == "") {
			t.Fatalf("empty bucket or key: %+v", l)
		}
	})
}
