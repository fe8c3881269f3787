package mailer

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
)

// parseAddress accepts a bare address, or with named also "Name <addr>";
// line breaks are refused wherever they are.
func parseAddress(s string, named bool) (*mail.Address, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, fmt.Errorf("%w: a line break in address %q", ErrMessage, s)
	}
	a, err := mail.ParseAddress(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %w", ErrMessage, s, err)
	}
	if !named && a.Name != "" {
		return nil, fmt.Errorf("%w: want a bare address, got %q", ErrMessage, s)
	}
	return a, nil
}

// build encodes msg as an RFC 5322 message with CRLF line ends: a UTF-8
// text/plain body in quoted-printable (any line length, any character
// passes every relay), the subject as an RFC 2047 word when it is not
// ASCII. It returns the message and the bare recipient address.
func (m *Mailer) build(msg Message) ([]byte, string, error) {
	to, err := parseAddress(msg.To, false)
	if err != nil {
		return nil, "", err
	}
	from, err := parseAddress(m.c.From, true)
	if err != nil {
		return nil, "", err
	}
	if strings.ContainsAny(msg.Subject, "\r\n") {
		return nil, "", fmt.Errorf("%w: a line break in the subject", ErrMessage)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, "", err
	}
	domain := from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", from.String())
	header("To", to.String())
	header("Subject", mime.QEncoding.Encode("utf-8", msg.Subject))
	header("Date", m.now().Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	header("Message-ID", "<"+hex.EncodeToString(id)+"@"+domain+">")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	header("Auto-Submitted", "auto-generated")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	text := strings.ReplaceAll(strings.ReplaceAll(msg.Text, "\r\n", "\n"), "\n", "\r\n")
	if _, err := qp.Write([]byte(text)); err != nil {
		return nil, "", err
	}
	if err := qp.Close(); err != nil {
		return nil, "", err
	}
	if b.Len() > m.c.MaxMessageBytes {
		return nil, "", fmt.Errorf("%w: the message has %d bytes, the cap is %d", ErrMessage, b.Len(), m.c.MaxMessageBytes)
	}
	return b.Bytes(), to.Address, nil
}
