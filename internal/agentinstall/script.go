package agentinstall

import (
	_ "embed"
	"text/template"
)

//go:embed install.sh.tmpl
var scriptText string

// scriptData fills install.sh.tmpl. URL passed checkBase or hostChars, so
// it holds no quote or shell metacharacter and may sit in single quotes.
type scriptData struct{ URL string }

var script = template.Must(template.New("install.sh").Option("missingkey=error").Parse(scriptText))
