/*
 * scheme_registry.c
 *		The registry of signature schemes: for each, its name, how its secret
 *		becomes a key, how a request is checked, whether the signature covers
 *		a timestamp and where the event id is.
 *
 * May call: the schemes (scheme_*.c), the wire format (wire.h) and the
 * crypto (crypto.h: the digest of a body that names no event id).  The one
 * table that idem_webhook_verify, idem_webhook_receive and the sources
 * read: a scheme is added here, once.
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "webhook/scheme.h"

static bool event_id_member(const VerifyScheme *scheme,
							const VerifyRequest *req, Slice *id);
static bool event_id_member_or_number(const VerifyScheme *scheme,
									  const VerifyRequest *req, Slice *id);
static bool event_id_header(const VerifyScheme *scheme,
							const VerifyRequest *req, Slice *id);
static bool event_id_form(const VerifyScheme *scheme,
						  const VerifyRequest *req, Slice *id);
static bool event_id_body_digest(const VerifyScheme *scheme,
								 const VerifyRequest *req, Slice *id);
static bool event_id_member_or_digest(const VerifyScheme *scheme,
									  const VerifyRequest *req, Slice *id);

/* In the order the hint of an unknown scheme lists them */
static const VerifyScheme schemes[] = {
	{"stripe", idem_stripe_prepare, idem_stripe_verify, true,
	event_id_member, "id"},
	{"standard", idem_standard_prepare, idem_standard_verify, true,
	event_id_header, "webhook-id"},
	{"svix", idem_svix_prepare, idem_standard_verify, true,
	event_id_header, "svix-id"},
	{"github", idem_github_prepare, idem_body_mac_verify, false,
	event_id_header, "X-GitHub-Delivery"},
	{"shopify", idem_shopify_prepare, idem_body_mac_verify, false,
	event_id_header, "X-Shopify-Webhook-Id"},
	{"razorpay", idem_razorpay_prepare, idem_body_mac_verify, false,
	event_id_header, "X-Razorpay-Event-Id"},
	{"checkout", idem_checkout_prepare, idem_body_mac_verify, false,
	event_id_member, "id"},
	{"paddle", idem_paddle_prepare, idem_paddle_verify, true,
	event_id_member, "event_id"},
	/* pspReference:eventCode:success of the notification item */
	{"adyen", idem_adyen_prepare, idem_adyen_verify, false,
	idem_adyen_event_id},
	/* these webhooks carry no event id: a retry resends the same body */
	{"adyen_platform", idem_adyen_platform_prepare, idem_body_mac_verify, false,
	event_id_body_digest},
	{"square", idem_square_prepare, idem_body_mac_verify, false,
	event_id_member, "event_id"},
	/* Paystack's events carry no id either; a retry resends the same body */
	{"paystack", idem_paystack_prepare, idem_body_mac_verify, false,
	event_id_body_digest},
	{"airwallex", idem_airwallex_prepare, idem_body_mac_verify, true,
	event_id_member, "id"},
	{"alipay", idem_alipay_prepare, idem_alipay_verify, false,
	event_id_form, "notify_id", "charset"},
	/* a v3 message's notify_id when its JSON names one, else its body's digest */
	{"alipay_v3", idem_alipay_prepare, idem_alipay_v3_verify, true,
	event_id_member_or_digest, "notify_id"},
	/* Antom's notifications carry no event id: a retry resends the same body */
	{"antom", idem_antom_prepare, idem_antom_verify, false,
	event_id_body_digest},
	{"unionpay", idem_unionpay_prepare, idem_unionpay_verify, false,
	event_id_form, "queryId", "encoding"},
	{"wechatpay", idem_wechatpay_prepare, idem_wechatpay_verify, true,
	event_id_member, "id"},
	{"paypal", idem_paypal_prepare, idem_paypal_verify, true,
	event_id_member, "id"},
	/* the notification's id, a string or a number: not signed */
	{"mercadopago", idem_mercadopago_prepare, idem_mercadopago_verify, true,
	event_id_member_or_number, "id"},
};

/* The scheme of that name, or NULL */
const VerifyScheme *
idem_verify_scheme(Slice name)
{
	for (int i = 0; i < lengthof(schemes); i++)
		if (idem_slice_is(name, schemes[i].name))
			return &schemes[i];
	return NULL;
}

/* The scheme names, quoted and comma-separated, for messages */
const char *
idem_verify_scheme_names(void)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < lengthof(schemes); i++)
		appendStringInfo(&buf, "%s\"%s\"", i > 0 ? ", " : "", schemes[i].name);
	return buf.data;
}

/* The event id of a body that names none: the hex SHA-256 of the body */
static bool
event_id_body_digest(const VerifyScheme *scheme, const VerifyRequest *req, Slice *id)
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int len = idem_verify_digest(EVP_sha256(), &req->payload, 1, digest);

	id->data = idem_encode_hex(digest, len);
	id->len = 2 * len;
	return true;
}

/* The event id in a non-empty string member of the JSON body's root, else its digest */
static bool
event_id_member_or_digest(const VerifyScheme *scheme, const VerifyRequest *req, Slice *id)
{
	if (idem_json_member_string(req->payload, scheme->id_name, id) && id->len > 0)
		return true;
	return event_id_body_digest(scheme, req, id);
}

/* The event id in a string member of the JSON body's root */
static bool
event_id_member(const VerifyScheme *scheme, const VerifyRequest *req, Slice *id)
{
	return idem_json_member_string(req->payload, scheme->id_name, id);
}

/* The event id in a member of the JSON body's root, a string or a number's text */
static bool
event_id_member_or_number(const VerifyScheme *scheme, const VerifyRequest *req, Slice *id)
{
	const char *const path[] = {scheme->id_name, NULL};

	return idem_json_path_scalar(req->payload, path, id);
}

/* The event id in a header */
static bool
event_id_header(const VerifyScheme *scheme, const VerifyRequest *req, Slice *id)
{
	return idem_find_header(req->headers, scheme->id_name, id);
}

/* The event id in a parameter of the form body, in the charset it names */
static bool
event_id_form(const VerifyScheme *scheme, const VerifyRequest *req, Slice *id)
{
	Form		form;

	return idem_form_decode_charset(req->payload, scheme->id_charset, &form) &&
		idem_form_get(&form, scheme->id_name, id);
}
