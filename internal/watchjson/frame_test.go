package watchjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	clientgoframer "k8s.io/apimachinery/pkg/util/framer"
)

// chunked hands out at most n bytes a read, then err where the data ends
// (io.EOF or another), with the last bytes when withLast.
type chunked struct {
	data     []byte
	n        int
	err      error
	withLast bool
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, c.err
	}
	n := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[n:]
	if len(c.data) == 0 && c.withLast {
		return n, c.err
	}
	return n, nil
}

func (c *chunked) Close() error { return nil }

// readFrames reads r's frames as client-go's streaming decoder does, into
// a buffer of size bytes that it keeps, a frame longer than it coming in
// pieces with io.ErrShortBuffer, until r's first error other than that.
func readFrames(r io.Reader, size int) ([]string, error) {
	var frames []string
	buf := make([]byte, size)
	var frame []byte
	for {
		n, err := r.Read(buf)
		frame = append(frame, buf[:n]...)
		switch {
		case errors.Is(err, io.ErrShortBuffer):
			continue
		case err != nil:
			return frames, err
		}
		frames = append(frames, string(frame))
		frame = nil
	}
}

// clientGoFrames are the frames client-go's JSON frame reader finds in
// stream, and its error.
func clientGoFrames(stream []byte, size int) ([]string, error) {
	return readFrames(clientgoframer.NewJSONFramedReader(io.NopCloser(bytes.NewReader(stream))), size)
}

func ourFrames(stream []byte, chunk, size int, end error, withLast bool) ([]string, error) {
	return readFrames(framer{}.NewFrameReader(&chunked{data: stream, n: chunk, err: end, withLast: withLast}), size)
}

const event = `{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a{b]","annotations":{"q":"say \"}\" and \\","e":"\\\\\"{"}},"data":{"x":"[[{{"}}}`

func TestFramesAreClientGosFrames(t *testing.T) {
	stream := []byte(event + "\n" + `{"type":"ADDED","object":{"a":[1,{"b":[]},"]"]}}` + "\r\n\t " + `[{"c":"}"}]` + event + "\n\n")
	want, err := clientGoFrames(stream, 1<<20)
	if err != io.EOF || len(want) != 4 {
		t.Fatalf("client-go's frame reader: %d frames, %v", len(want), err)
	}
	for chunk := 1; chunk <= len(stream); chunk++ {
		for _, size := range []int{1, 7, len(event) - 1, len(event), 1 << 20} {
			for _, withLast := range []bool{false, true} {
				got, err := ourFrames(stream, chunk, size, io.EOF, withLast)
				if err != io.EOF || strings.Join(got, "|") != strings.Join(want, "|") {
					t.Fatalf("chunks of %d, a buffer of %d: %q, %v\nwant %q, EOF", chunk, size, got, err, want)
				}
			}
		}
	}
}

func TestAStreamEndingInAFrameIsAnUnexpectedEOF(t *testing.T) {
	stream := []byte(event + "\n" + event[:len(event)-1])
	for chunk := 1; chunk <= len(stream); chunk++ {
		got, err := ourFrames(stream, chunk, 512, io.EOF, chunk%2 == 0)
		if len(got) != 1 || got[0] != event || err != io.ErrUnexpectedEOF {
			t.Fatalf("chunks of %d: %d frames, %v; want one, then io.ErrUnexpectedEOF", chunk, len(got), err)
		}
	}
}

// A stream's error (the connection closed, a timeout) comes after the
// frames read before it, and stays.
func TestTheStreamsErrorComesAfterItsFrames(t *testing.T) {
	broken := errors.New("http2: response body closed")
	stream := []byte(event + event + "\n")
	r := framer{}.NewFrameReader(&chunked{data: stream, n: len(stream), err: broken, withLast: true})
	got, err := readFrames(r, 4096)
	if len(got) != 2 || err != broken {
		t.Fatalf("%d frames, %v; want 2, then %v", len(got), err, broken)
	}
	if _, err := r.Read(make([]byte, 10)); err != broken {
		t.Fatalf("read after the error: %v, want %v again", err, broken)
	}
}

func TestWhatIsNotAnObjectIsAnError(t *testing.T) {
	for _, stream := range []string{event + ` true ` + event, `"text"`, `} {}`} {
		got, err := ourFrames([]byte(stream), 3, 4096, io.EOF, false)
		if err == nil || err == io.EOF || !strings.Contains(err.Error(), "where a JSON object should begin") {
			t.Errorf("%.20q...: %d frames, %v; want an error saying it is not an object", stream, len(got), err)
		}
	}
}

func TestAFrameWithoutAnEndIsRefusedPastTheLimit(t *testing.T) {
	r := framer{}.NewFrameReader(io.NopCloser(io.MultiReader(strings.NewReader(`{"data":"`), zeros{})))
	if _, err := readFrames(r, 4096); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("%v, want the limit's error", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// FuzzFrameReader holds the frame reader to client-go's JSON frame reader:
// wherever client-go's finds a JSON object or array, in whatever pieces
// the stream comes and into whatever buffer it is read, this one finds
// the same bytes; where client-go's fails, this one fails too, or hands
// over a frame that is not JSON, which the decoder after it refuses.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte(event+"\n"+event+"\n"), uint16(1), uint16(64))
	f.Add([]byte(`{"a":"\"}"} [1,[2]] {"b":{}}`), uint16(5), uint16(3))
	f.Add([]byte(`{"a":tru} {}`), uint16(100), uint16(100))
	f.Fuzz(func(t *testing.T, stream []byte, chunk, size uint16) {
		want, wantErr := clientGoFrames(stream, int(size)+1)
		got, err := ourFrames(stream, int(chunk)+1, int(size)+1, io.EOF, chunk%2 == 0)
		for i, frame := range want {
			if c := bytes.TrimSpace([]byte(frame)); len(c) == 0 || (c[0] != '{' && c[0] != '[') {
				// A bare value: not a frame this reader hands over.
				want, wantErr = want[:i], errors.New("not an object")
				break
			}
		}
		if len(got) < len(want) {
			t.Fatalf("%d frames, %v; client-go's reader found %d", len(got), err, len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("frame %d: %q, client-go's reader %q", i, got[i], want[i])
			}
		}
		if wantErr == io.EOF {
			if len(got) != len(want) || err != io.EOF {
				t.Fatalf("%d frames, %v; client-go's reader found %d, then EOF", len(got), err, len(want))
			}
			return
		}
		if len(got) > len(want) && json.Valid([]byte(got[len(want)])) {
			t.Fatalf("frame %d %q is JSON where client-go's reader failed: %v", len(want), got[len(want)], wantErr)
		}
		if len(got) == len(want) && (err == nil || err == io.EOF) {
			t.Fatalf("no error where client-go's reader failed: %v", wantErr)
		}
	})
}
