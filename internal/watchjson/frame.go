package watchjson

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// framer is the JSON stream serializer's framer with frameReader to read
// a watch: client-go's JSON framer finds where an event ends with
// encoding/json's Decoder, which runs its scanner's state machine over
// every byte twice (to read the value, then to skip it into a
// json.RawMessage) and copies it; that was about 70% of what decoding a
// B2 child's watch event cost after the one-pass decoder
// (BenchmarkWatchEventDecode's profile). What it writes is the JSON
// framer's.
type framer struct {
	runtime.Framer
}

func (framer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r}
}

// frameReader reads a stream of JSON objects (or arrays), each one frame,
// as client-go's JSON frame reader does, finding where each ends by its
// brackets alone, outside strings. It does not check that what is between
// the brackets is JSON: the decoder a frame goes to does, and refuses the
// event, which ends the watch, as a syntax error found here would have.
// What is not an object or an array (a bare word between two frames,
// say) is an error here.
type frameReader struct {
	r   io.ReadCloser
	buf []byte
	// buf[start:end] are the bytes read and not yet framed, of which the
	// first scanned were scanned for the end of the frame starting at
	// start, with the state below at their end.
	start, end, scanned int
	depth               int
	inString, escaped   bool
	// remaining is what is left of a frame longer than the caller's
	// buffer, returned by the next reads before another frame.
	remaining []byte
	err       error
}

// minRead is the free space frameReader reads into at least; its buffer
// doubles until it holds the longest event read and this much more: a B2
// child's watch event is about 800 bytes, and an HTTP/2 body seldom hands
// over more than a few at once.
const minRead = 4 << 10

// maxFrameBytes is the most frameReader keeps of one frame: as client-go's
// streaming decoder refuses an object of more than 16 MiB, this does not
// let a frame whose end never comes take all memory.
const maxFrameBytes = 16 << 20

// Read returns the next frame in data, or as much of it as data holds
// with io.ErrShortBuffer, the rest coming with the next reads (what
// client-go's streaming decoder expects of a frame reader).
func (r *frameReader) Read(data []byte) (int, error) {
	if len(r.remaining) > 0 {
		n := copy(data, r.remaining)
		if r.remaining = r.remaining[n:]; len(r.remaining) > 0 {
			return n, io.ErrShortBuffer
		}
		return n, nil
	}
	frame, err := r.next()
	if err != nil {
		return 0, err
	}
	n := copy(data, frame)
	if n < len(frame) {
		// frame is in buf, which the next frame's read may move: the rest
		// is kept until then, and returned before it.
		r.remaining = frame[n:]
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (r *frameReader) Close() error {
	return r.r.Close()
}

// next is the next frame, a slice of buf valid until the next call.
// Frames read before an error of the stream are returned before it, and
// the error is kept for every call after.
func (r *frameReader) next() ([]byte, error) {
	for {
		frameEnd, ok, err := r.scan()
		if ok {
			frame := r.buf[r.start:frameEnd]
			r.start, r.scanned = frameEnd, frameEnd
			return frame, nil
		}
		if err != nil {
			r.err = err
		}
		if r.err != nil {
			if r.err == io.EOF && r.start < r.end {
				// A frame was begun and not ended.
				r.err = io.ErrUnexpectedEOF
			}
			return nil, r.err
		}
		r.err = r.fill()
	}
}

// scan skips the space before a frame and scans for its end from where
// the last scan stopped; ok says a frame ends before end, err that what
// begins there is not a frame.
func (r *frameReader) scan() (frameEnd int, ok bool, err error) {
	if r.scanned == r.start {
		for r.start < r.end && isSpace(r.buf[r.start]) {
			r.start++
		}
		r.scanned = r.start
		if r.start == r.end {
			return 0, false, nil
		}
		if c := r.buf[r.start]; c != '{' && c != '[' {
			return 0, false, fmt.Errorf("watch stream: invalid character %q where a JSON object should begin", c)
		}
		r.depth, r.inString, r.escaped = 0, false, false
	}
	for i := r.scanned; i < r.end; i++ {
		c := r.buf[i]
		switch {
		case r.escaped:
			r.escaped = false
		case r.inString:
			switch c {
			case '\\':
				r.escaped = true
			case '"':
				r.inString = false
			}
		case c == '"':
			r.inString = true
		case c == '{' || c == '[':
			r.depth++
		case c == '}' || c == ']':
			if r.depth--; r.depth == 0 {
				return i + 1, true, nil
			}
		}
	}
	r.scanned = r.end
	return 0, false, nil
}

// fill reads more of the stream after buf[start:end], first moving those
// bytes to the front or to a larger buffer when there is too little room
// behind them.
func (r *frameReader) fill() error {
	if len(r.buf)-r.end < minRead {
		pending := r.end - r.start
		if pending > maxFrameBytes {
			return fmt.Errorf("watch stream: an event longer than %d bytes", maxFrameBytes)
		}
		buf := r.buf
		if pending+minRead > len(buf) {
			buf = make([]byte, max(2*len(buf), pending+minRead))
		}
		copy(buf, r.buf[r.start:r.end])
		r.scanned -= r.start
		r.buf, r.start, r.end = buf, 0, pending
	}
	n, err := r.r.Read(r.buf[r.end:])
	r.end += n
	return err
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t'
}
