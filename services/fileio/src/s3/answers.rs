//! The S3 server's XML answers that rusty-s3 does not parse, read as typed structs with
//! quick-xml's serde support: the `<Error>` of a refused request (or of a 200 that failed
//! after its status was sent), `<CopyObjectResult>`, `<CompleteMultipartUploadResult>`
//! and `<ListMultipartUploadsResult>`. rusty-s3 parses ListObjectsV2, ListParts and
//! CreateMultipartUpload itself.
//!
//! An XML parser, not a search for tags: character data comes back as the server meant
//! it whatever escapes it wrote (`&amp;`, `&lt;`, `&#34;`, `&#x27;`, CDATA), an element
//! nested in another is not taken for its parent's (an `<Error>`'s own `<Code>` is the
//! one read), and unknown elements are skipped.

use quick_xml::DeError;
use serde::Deserialize;

/// The `<Error>` body of a refused request. Both fields are empty when the server gave
/// no such body (HEAD, or a proxy's HTML page).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub(super) struct ErrorBody {
    /// The S3 error code: `NoSuchKey`, `SlowDown`, `SignatureDoesNotMatch`, ...
    #[serde(default)]
    pub code: String,
    /// The server's explanation.
    #[serde(default)]
    pub message: String,
}

impl ErrorBody {
    /// The `<Error>` in `body`; an empty one when the body is not such an answer.
    pub(super) fn parse(body: &[u8]) -> Self {
        match quick_xml::de::from_reader::<_, Root>(body) {
            Ok(Root::Error(error)) => error,
            _ => Self::default(),
        }
    }
}

/// What a 200 answer of CopyObject, UploadPartCopy or CompleteMultipartUpload says: S3 may send the
/// status first and fail later, with an `<Error>` for the body.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Completion {
    /// The new object's ETag, without quotes.
    Done(String),
    /// The failure reported in the body.
    Failed(ErrorBody),
}

impl Completion {
    /// Reads a CopyObject or CompleteMultipartUpload answer.
    pub(super) fn parse(body: &[u8]) -> Result<Self, DeError> {
        Ok(match quick_xml::de::from_reader::<_, Root>(body)? {
            Root::CopyObjectResult(result)
            | Root::CopyPartResult(result)
            | Root::CompleteMultipartUploadResult(result) => {
                Self::Done(result.etag.trim_matches('"').to_owned())
            }
            Root::Error(error) => Self::Failed(error),
            Root::ListMultipartUploadsResult(_) => {
                return Err(DeError::Custom(
                    "a list of uploads where an object's ETag was due".to_owned(),
                ));
            }
        })
    }
}

/// A multipart upload under way, as ListMultipartUploads names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Upload {
    /// The key the upload is of.
    pub key: String,
    /// The upload id.
    pub id: String,
    /// When it began, RFC 3339 (empty when the server gave none).
    pub initiated: String,
}

/// Where the next page of a ListMultipartUploads starts: its key and upload id markers.
pub(super) type NextUploads = Option<(String, String)>;

/// The uploads of a ListMultipartUploads answer (the page it holds), their keys
/// URL-decoded when the server says it encoded them (`<EncodingType>url`), and where the
/// next page starts when there is one.
pub(super) fn uploads(body: &[u8]) -> Result<(Vec<Upload>, NextUploads), DeError> {
    let listing = match quick_xml::de::from_reader::<_, Root>(body)? {
        Root::ListMultipartUploadsResult(listing) => listing,
        _ => return Err(DeError::Custom("no <ListMultipartUploadsResult>".to_owned())),
    };
    let url_encoded = listing.encoding_type.as_deref() == Some("url");
    let next = listing.is_truncated.then(|| {
        let key = match url_encoded {
            true => url_decoded(&listing.next_key_marker),
            false => listing.next_key_marker.clone(),
        };
        (key, listing.next_upload_id_marker.clone())
    });
    let page = listing
        .uploads
        .into_iter()
        .map(|upload| Upload {
            key: if url_encoded {
                url_decoded(&upload.key)
            } else {
                upload.key
            },
            id: upload.upload_id,
            initiated: upload.initiated,
        })
        .collect();
    Ok((page, next))
}

/// The body of a CompleteMultipartUpload naming each part by its number and ETag.
pub(super) fn completion_body(parts: &[(u16, &str)]) -> String {
    let mut body = String::from("<CompleteMultipartUpload>");
    for (number, etag) in parts {
        body.push_str("<Part><ETag>");
        for c in etag.chars() {
            match c {
                '&' => body.push_str("&amp;"),
                '<' => body.push_str("&lt;"),
                '>' => body.push_str("&gt;"),
                '"' => body.push_str("&quot;"),
                c => body.push(c),
            }
        }
        body.push_str(&format!("</ETag><PartNumber>{number}</PartNumber></Part>"));
    }
    body.push_str("</CompleteMultipartUpload>");
    body
}

/// A key as S3 gives it with `encoding-type=url`: percent-encoded, and a space as `+`
/// by AWS and MinIO, as HTML forms do (a `+` itself is `%2B`). Left as it is when it does
/// not decode to UTF-8.
fn url_decoded(text: &str) -> String {
    let spaced = text.replace('+', " ");
    match percent_encoding::percent_decode_str(&spaced).decode_utf8() {
        Ok(decoded) => decoded.into_owned(),
        Err(_) => text.to_owned(),
    }
}

/// The answers this module reads, told apart by their root element.
#[derive(Deserialize)]
enum Root {
    Error(ErrorBody),
    CopyObjectResult(Etagged),
    CopyPartResult(Etagged),
    CompleteMultipartUploadResult(Etagged),
    ListMultipartUploadsResult(UploadsListing),
}

/// An answer whose news is an object's ETag.
#[derive(Deserialize)]
struct Etagged {
    #[serde(rename = "ETag", default)]
    etag: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct UploadsListing {
    #[serde(rename = "Upload", default)]
    uploads: Vec<ListedUpload>,
    #[serde(default)]
    encoding_type: Option<String>,
    #[serde(default)]
    is_truncated: bool,
    #[serde(default)]
    next_key_marker: String,
    #[serde(default)]
    next_upload_id_marker: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListedUpload {
    key: String,
    upload_id: String,
    #[serde(default)]
    initiated: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What versitygw (Go's encoding/xml) writes for `"` and `'`: character references.
    #[test]
    fn uploads_keep_their_keys_however_escaped() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>files</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>
  <NextKeyMarker></NextKeyMarker><Prefix>served/</Prefix><MaxUploads>1000</MaxUploads>
  <IsTruncated>false</IsTruncated>
  <Upload>
    <Key>served/a&amp;b &lt;c&gt; &#34;d&#34; it&#39;s &quot;e&quot; &apos;f&apos; 100% a+b gr&#xFC;&#223;e &#x65E5;&#26412;.txt</Key>
    <UploadId>id-1</UploadId>
    <Initiator><ID>root</ID><DisplayName>root</DisplayName></Initiator>
    <Owner><ID>root</ID><DisplayName>root</DisplayName></Owner>
    <StorageClass>STANDARD</StorageClass>
    <Initiated>2026-01-02T03:04:05.5Z</Initiated>
  </Upload>
  <Upload><Key>served/&amp;amp;.txt</Key><UploadId>id&amp;2</UploadId></Upload>
  <Upload><Key><![CDATA[served/<raw> & "cdata".txt]]></Key><UploadId>id-3</UploadId><Initiated>2026-01-02T03:04:05Z</Initiated></Upload>
</ListMultipartUploadsResult>"#;
        assert_eq!(
            uploads(body).unwrap().0,
            vec![
                Upload {
                    key: "served/a&b <c> \"d\" it's \"e\" 'f' 100% a+b gr\u{fc}\u{df}e \u{65e5}\u{672c}.txt"
                        .to_owned(),
                    id: "id-1".to_owned(),
                    initiated: "2026-01-02T03:04:05.5Z".to_owned(),
                },
                Upload {
                    key: "served/&amp;.txt".to_owned(),
                    id: "id&2".to_owned(),
                    initiated: String::new(),
                },
                Upload {
                    key: "served/<raw> & \"cdata\".txt".to_owned(),
                    id: "id-3".to_owned(),
                    initiated: "2026-01-02T03:04:05Z".to_owned(),
                },
            ]
        );
    }

    #[test]
    fn url_encoded_upload_keys_are_decoded() {
        let body = br#"<ListMultipartUploadsResult><EncodingType>url</EncodingType>
  <Upload><Key>served/a%26b+c%2B%25%20%C3%BC.txt</Key><UploadId>u</UploadId></Upload>
</ListMultipartUploadsResult>"#;
        let listed = uploads(body).unwrap().0;
        assert_eq!(listed[0].key, "served/a&b c+% \u{fc}.txt");
    }

    #[test]
    fn no_uploads_is_an_empty_list() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>"#;
        assert_eq!(uploads(body).unwrap(), (vec![], None));
        assert_eq!(
            uploads(br#"<ListMultipartUploadsResult/>"#).unwrap(),
            (vec![], None)
        );
        let truncated = br#"<ListMultipartUploadsResult><IsTruncated>true</IsTruncated><NextKeyMarker>a/b</NextKeyMarker><NextUploadIdMarker>x1</NextUploadIdMarker></ListMultipartUploadsResult>"#;
        assert_eq!(
            uploads(truncated).unwrap().1,
            Some(("a/b".to_owned(), "x1".to_owned()))
        );
        assert!(uploads(b"<Error><Code>AccessDenied</Code></Error>").is_err());
        assert!(uploads(b"not xml at all").is_err());
    }

    #[test]
    fn an_error_is_read_from_its_own_elements() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<Error>
  <Details><Code>Nested</Code><Message>not this one</Message></Details>
  <Code>SlowDown</Code>
  <Message>Please reduce your request rate for &lt;served/a&amp;b&gt; &#34;now&#34;.</Message>
  <Key>served/a&amp;b</Key>
  <RequestId>4442587FB7D0A2F9</RequestId>
  <HostId/>
</Error>"#;
        assert_eq!(
            ErrorBody::parse(body),
            ErrorBody {
                code: "SlowDown".to_owned(),
                message: "Please reduce your request rate for <served/a&b> \"now\".".to_owned(),
            }
        );
    }

    #[test]
    fn an_answer_that_is_no_error_gives_an_empty_one() {
        for body in [
            &b""[..],
            b"<html><body>502 Bad Gateway</body></html>",
            b"<CopyObjectResult><ETag>x</ETag></CopyObjectResult>",
            b"<Error><Code>Cut",
        ] {
            assert_eq!(ErrorBody::parse(body), ErrorBody::default(), "{body:?}");
        }
        assert_eq!(
            ErrorBody::parse(b"<Error><Code>NoSuchKey</Code></Error>"),
            ErrorBody {
                code: "NoSuchKey".to_owned(),
                message: String::new()
            }
        );
    }

    #[test]
    fn completions_give_the_etag_or_the_late_error() {
        let copied = br#"<?xml version="1.0" encoding="UTF-8"?>
<CopyObjectResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LastModified>2026-01-02T03:04:05.000Z</LastModified><ETag>&#34;9b2cf535f27731c974343645a3985328&#34;</ETag></CopyObjectResult>"#;
        assert_eq!(
            Completion::parse(copied).unwrap(),
            Completion::Done("9b2cf535f27731c974343645a3985328".to_owned())
        );
        let completed = br#"<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Location>http://s3/files/served/a%26b</Location><Bucket>files</Bucket><Key>served/a&amp;b</Key>
  <ETag>&quot;3858f62230ac3c915f300c664312c11f-9&quot;</ETag>
</CompleteMultipartUploadResult>"#;
        assert_eq!(
            Completion::parse(completed).unwrap(),
            Completion::Done("3858f62230ac3c915f300c664312c11f-9".to_owned())
        );
        let late = b"\n\n<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>";
        assert_eq!(
            Completion::parse(late).unwrap(),
            Completion::Failed(ErrorBody {
                code: "InternalError".to_owned(),
                message: "We encountered an internal error. Please try again.".to_owned(),
            })
        );
        assert!(Completion::parse(b"").is_err());
        assert!(Completion::parse(b"<CopyObjectResult><ETag>cut").is_err());
        assert!(Completion::parse(b"<ListMultipartUploadsResult/>").is_err());
    }
}
