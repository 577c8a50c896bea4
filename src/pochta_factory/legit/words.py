"""The phrase banks of the generated legitimate letters, in English and Russian. Pure data.

Slots in braces are filled by :mod:`pochta_factory.legit.compose`: ``{brand}``,
``{name}``, ``{order}``, ``{date}``, ``{month}``, ``{topic}``, ``{event}``, ``{percent}``,
``{n}``, ``{issue}``, ``{carrier}``, ``{domain}``, ``{city}``, ``{amount}``, ``{product}``.
"""

from __future__ import annotations

Bank = dict[str, tuple[str, ...]]

MONTHS = {
    "en": ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"),
    "ru": ("января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа",
           "сентября", "октября", "ноября", "декабря"),
    "ru_nom": ("январь", "февраль", "март", "апрель", "май", "июнь", "июль", "август",
               "сентябрь", "октябрь", "ноябрь", "декабрь"),
}  # fmt: skip
WEEKDAYS = {
    "en": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "ru": ("понедельник", "вторник", "среду", "четверг", "пятницу", "субботу", "воскресенье"),
}

FIRST_NAMES = {
    "en": ("Anna", "James", "Emily", "Michael", "Sarah", "David", "Laura", "Daniel", "Olivia",
           "Robert", "Sophie", "Thomas", "Grace", "Peter", "Hannah", "Mark", "Julia", "Chris",
           "Rachel", "Simon", "Kate", "Alex", "Natalie", "Ben"),
    "ru": ("Анна", "Иван", "Мария", "Дмитрий", "Елена", "Сергей", "Ольга", "Алексей",
           "Татьяна", "Андрей", "Наталья", "Михаил", "Екатерина", "Павел", "Ирина", "Николай",
           "Светлана", "Владимир", "Юлия", "Артём", "Ксения", "Георгий", "Дарья", "Максим"),
}  # fmt: skip
LAST_NAMES = {
    "en": ("Smith", "Brown", "Taylor", "Wilson", "Clarke", "Walker", "Hughes", "Green",
           "Turner", "Baker", "Morris", "Cooper", "Reed", "Price", "Bennett", "Ward"),
    "ru": ("Иванов", "Смирнов", "Кузнецов", "Попов", "Соколов", "Лебедев", "Козлов", "Новиков",
           "Морозов", "Волков", "Соловьёв", "Васильев", "Зайцев", "Павлов", "Семёнов", "Голубев"),
}  # fmt: skip
LATIN = {
    "Анна": "anna", "Иван": "ivan", "Мария": "maria", "Дмитрий": "dmitry", "Елена": "elena",
    "Сергей": "sergey", "Ольга": "olga", "Алексей": "alexey", "Татьяна": "tatiana",
    "Андрей": "andrey", "Наталья": "natalia", "Михаил": "mikhail", "Екатерина": "ekaterina",
    "Павел": "pavel", "Ирина": "irina", "Николай": "nikolay", "Светлана": "svetlana",
    "Владимир": "vladimir", "Юлия": "yulia", "Артём": "artem", "Ксения": "ksenia",
    "Георгий": "georgy", "Дарья": "daria", "Максим": "maxim", "Иванов": "ivanov",
    "Смирнов": "smirnov", "Кузнецов": "kuznetsov", "Попов": "popov", "Соколов": "sokolov",
    "Лебедев": "lebedev", "Козлов": "kozlov", "Новиков": "novikov", "Морозов": "morozov",
    "Волков": "volkov", "Соловьёв": "solovyov", "Васильев": "vasiliev", "Зайцев": "zaitsev",
    "Павлов": "pavlov", "Семёнов": "semenov", "Голубев": "golubev",
}  # fmt: skip
MAILBOX_DOMAINS = ("gmail.com", "yahoo.com", "outlook.com", "yandex.ru", "mail.ru", "rambler.ru",
                   "icloud.com", "hotmail.co.uk", "gmx.de", "proton.me", "inbox.ru", "bk.ru",
                   "example.org", "fastmail.fm", "aol.com", "ya.ru")  # fmt: skip
CITIES = {
    "en": ("London", "Manchester", "Boston", "Chicago", "Seattle", "Austin", "Denver", "Leeds",
           "Toronto", "Dublin", "Portland", "Bristol"),
    "ru": ("Москва", "Санкт-Петербург", "Казань", "Екатеринбург", "Новосибирск", "Самара",
           "Нижний Новгород", "Пермь", "Краснодар", "Воронеж", "Томск", "Ярославль"),
}  # fmt: skip
STREETS = {
    "en": ("High Street", "Market Street", "Oak Avenue", "Harbour Road", "Elm Street",
           "Mill Lane", "Station Road", "Park Avenue", "King Street", "Church Road"),
    "ru": ("ул. Ленина", "ул. Садовая", "пр. Мира", "ул. Гагарина", "наб. Реки Фонтанки",
           "ул. Пушкина", "Лесная ул.", "ул. Победы", "Заводская ул.", "ул. Чкалова"),
}  # fmt: skip

GREETING_NAMED = {
    "en": ("Hi {name},", "Hello {name},", "Dear {name},", "{name}, hi!", "Good morning {name},",
           "Hey {name},"),
    "ru": ("Здравствуйте, {name}!", "{name}, добрый день!", "Добрый день, {name}!",
           "Привет, {name}!", "{name}, здравствуйте!", "Уважаемая(ый) {name}!"),
}  # fmt: skip
GREETING_PLAIN = {
    "en": ("Hello,", "Hi there,", "Hi,", "Good afternoon,", "Hello from {brand}!"),
    "ru": ("Добрый день!", "Здравствуйте!", "Привет!", "Доброго дня!", "Приветствуем!"),
}  # fmt: skip

TOPICS = {
    "en": (
        "how we rebuilt our search", "ten years of open data", "a guide to winter cycling",
        "the best budget espresso machines", "what our readers cooked this month",
        "notes from the product team", "planning a weekend in the mountains",
        "our most-read stories of the season", "a beginner's guide to sourdough",
        "the new reading list is here", "five tips for a calmer inbox",
        "behind the scenes at our warehouse", "how to choose running shoes",
        "small habits that save energy at home", "interview with our head chef",
        "what changed in the app this month", "the history of the paperback",
        "a short guide to houseplants", "travel light: packing lists that work",
        "a look back at the spring meetup",
    ),
    "ru": (
        "как мы перестроили поиск", "десять лет открытых данных", "зимний велосезон",
        "лучшие недорогие кофеварки", "что готовили читатели в этом месяце",
        "заметки команды продукта", "выходные в горах: с чего начать",
        "самые читаемые статьи сезона", "хлеб на закваске для начинающих",
        "новый список для чтения", "пять советов, как разобрать почту",
        "как устроен наш склад", "как выбрать кроссовки для бега",
        "привычки, которые экономят электричество", "интервью с шеф-поваром",
        "что нового в приложении", "история карманной книги", "комнатные растения без хлопот",
        "как собрать чемодан за 15 минут", "итоги весенней встречи",
    ),
}  # fmt: skip
BLURBS = {
    "en": (
        "We spent a few months on this one and learned a lot along the way.",
        "A short read with practical advice you can use today.",
        "Our editors picked the pieces you shared most often.",
        "Photos, numbers and a few honest mistakes.",
        "Everything you need to know before you start.",
        "A longer piece for a quiet evening.",
        "Readers asked for it, so we wrote it up.",
        "Some good news and one thing we are still working on.",
        "With a checklist at the end.",
        "Updated with your feedback from last month.",
    ),
    "ru": (
        "Мы работали над этим несколько месяцев и многому научились.",
        "Короткий текст с советами, которые пригодятся уже сегодня.",
        "Редакция собрала материалы, которыми вы чаще всего делились.",
        "Фотографии, цифры и пара честных ошибок.",
        "Всё, что нужно знать перед началом.",
        "Большой текст для спокойного вечера.",
        "Читатели просили — мы написали.",
        "Хорошие новости и одна задача, над которой мы ещё работаем.",
        "В конце — список для проверки.",
        "Дополнено по вашим отзывам за прошлый месяц.",
    ),
}  # fmt: skip
PRODUCTS = {
    "en": (
        "Linen shirt", "Ceramic mug set", "Wireless headphones", "Hiking backpack 30 L",
        "Cast iron skillet", "Wool scarf", "Desk lamp", "Running shoes", "Paperback: The Quiet Sea",
        "Notebook, dotted", "Coffee beans, 1 kg", "Yoga mat", "Phone case", "Water bottle",
        "Bike lights", "Tea sampler", "Kids' raincoat", "Board game: Harbour", "Bath towel",
        "Garden gloves",
    ),
    "ru": (
        "Льняная рубашка", "Набор керамических кружек", "Беспроводные наушники",
        "Рюкзак туристический 30 л", "Чугунная сковорода", "Шерстяной шарф", "Настольная лампа",
        "Кроссовки для бега", "Книга «Тихое море»", "Блокнот в точку", "Кофе в зёрнах, 1 кг",
        "Коврик для йоги", "Чехол для телефона", "Бутылка для воды", "Фонари для велосипеда",
        "Набор чая", "Детский дождевик", "Настольная игра «Гавань»", "Банное полотенце",
        "Садовые перчатки",
    ),
}  # fmt: skip
CATEGORIES = {
    "en": ("outerwear", "kitchenware", "books", "audio", "outdoor gear", "home textiles",
           "stationery", "coffee"),
    "ru": ("верхнюю одежду", "посуду", "книги", "наушники", "товары для туризма",
           "домашний текстиль", "канцелярию", "кофе"),
}  # fmt: skip
EVENTS = {
    "en": ("Spring Product Meetup", "Data Day", "Open Studio Evening", "Community Call",
           "Annual Members' Meeting", "Autumn Book Fair", "Developer Workshop", "Wine Tasting",
           "Photography Walk", "Customer Summit"),
    "ru": ("встречу пользователей", "День данных", "открытый вечер в студии",
           "созвон сообщества", "ежегодное собрание клуба", "книжную ярмарку", "практикум",
           "дегустацию", "фотопрогулку", "конференцию для клиентов"),
}  # fmt: skip
CARRIERS = {
    "en": (("UPS", "ups.com", "https://www.ups.com/track?tracknum={track}"),
           ("USPS", "usps.com", "https://tools.usps.com/go/TrackConfirmAction?tLabels={track}"),
           ("FedEx", "fedex.com", "https://www.fedex.com/fedextrack/?trknbr={track}"),
           ("Royal Mail", "royalmail.com", "https://www.royalmail.com/track-your-item#/{track}"),
           ("DPD", "dpd.co.uk", "https://track.dpd.co.uk/parcels/{track}")),
    "ru": (("СДЭК", "cdek.ru", "https://www.cdek.ru/ru/tracking?order_id={track}"),
           ("Boxberry", "boxberry.ru", "https://boxberry.ru/tracking-page?id={track}"),
           ("DPD", "dpd.ru", "https://www.dpd.ru/ols/trace2/standard.do2?orderNum={track}"),
           ("курьерская служба", "", "")),
}  # fmt: skip

SUBJECTS: dict[str, Bank] = {
    "en": {
        "newsletter": (
            "{brand} weekly: {topic}",
            "New this week at {brand}",
            "Your {month} digest",
            "{n} things we loved this week",
            "Fresh picks for you, {name}",
            "Up to {percent}% off {category} this weekend",
            "The {brand} newsletter #{issue}",
            "Weekend reading: {topic}",
            "{topic}",
            "News from {brand}",
            "What's new in {month}",
            "Our {month} update",
        ),
        "receipt": (
            "Your {brand} order #{order} is confirmed",
            "Receipt for your payment to {brand}",
            "Order confirmation #{order}",
            "Thanks for your order!",
            "Your receipt from {brand} [#{order}]",
            "We've received your order",
        ),
        "shipping": (
            "Your order #{order} has shipped",
            "Your package is on its way",
            "Your {brand} delivery arrives {weekday}",
            "Shipping update for order #{order}",
            "Order #{order}: out for delivery",
            "Your parcel has been dispatched",
        ),
        "account": (
            "Confirm your email address",
            "Your password was changed",
            "New sign-in to your {brand} account",
            "Your subscription renews on {date}",
            "Welcome to {brand}",
            "Your account details were updated",
            "Your {brand} invoice for {month}",
            "Your trial ends on {date}",
        ),
        "event": (
            "You're invited: {event} on {date}",
            "Join us: {event}",
            "{event}: registration is open",
            "Reminder: {event} is tomorrow",
            "Your ticket for {event}",
            "Save the date: {event}",
        ),
        "bill": (
            "Your {brand} bill for {month} is ready",
            "Payment received, thank you",
            "Your statement is available",
            "Your {month} bill: {amount}",
            "We've received your payment",
        ),
    },
    "ru": {
        "newsletter": (
            "{brand}: {topic}",
            "Новое на этой неделе",
            "Дайджест за {month_nom}",
            "{n} новинок недели",
            "{name}, подборка для вас",
            "Скидки до {percent}% на {category}",
            "Выпуск №{issue}",
            "Что почитать на выходных: {topic}",
            "Новости {brand}",
            "{topic}",
            "Главное за {month_nom}",
        ),
        "receipt": (
            "Заказ №{order} оформлен",
            "Ваш заказ №{order} подтверждён",
            "Чек по заказу №{order}",
            "Спасибо за покупку в {brand}!",
            "Электронный чек от {brand}",
            "Мы получили ваш заказ",
        ),
        "shipping": (
            "Заказ №{order} передан в доставку",
            "Ваша посылка в пути",
            "Заказ №{order} приедет {date}",
            "Заказ №{order} ждёт вас в пункте выдачи",
            "Статус заказа №{order} изменён",
        ),
        "account": (
            "Подтвердите адрес электронной почты",
            "Пароль изменён",
            "Вход в аккаунт {brand} с нового устройства",
            "Подписка продлится {date}",
            "Добро пожаловать в {brand}!",
            "Данные профиля изменены",
            "Счёт {brand} за {month_nom}",
            "Пробный период заканчивается {date}",
        ),
        "event": (
            "Приглашаем на {event} {date}",
            "{brand}: регистрация открыта",
            "Напоминание: завтра {event}",
            "Ваш билет на {event}",
            "Сохраните дату: {date}",
        ),
        "bill": (
            "Счёт за {month_nom} готов",
            "Оплата получена",
            "Выписка за {month_nom}",
            "Начисления за {month_nom}: {amount}",
            "Спасибо, платёж зачислен",
        ),
    },
}

TEXT: dict[str, Bank] = {
    "en": {
        "newsletter_intro": (
            "Here's what happened at {brand} this week.",
            "We've rounded up our favourite stories from the past few days.",
            "Thanks for reading. Here is this week's selection.",
            "A short one this time: three stories and a recipe.",
            "It has been a busy month, so here is everything in one place.",
            "New arrivals, a few restocks and one thing we are proud of.",
        ),
        "sale_intro": (
            "Our seasonal sale starts today and runs until {date}.",
            "Members get early access to this weekend's offers.",
            "We've marked down a few favourites, while stocks last.",
        ),
        "receipt_intro": (
            "Thanks for shopping with us. We've received your order and will email you when "
            "it ships.",
            "This is your receipt for order #{order} placed on {date}.",
            "Your payment was successful. Here are the details of your order.",
        ),
        "shipping_intro": (
            "Good news: your order #{order} is on its way with {carrier}.",
            "Your parcel left our warehouse today and should arrive by {date}.",
            "Order #{order} has been handed to {carrier}. You can follow it below.",
        ),
        "event_intro": (
            "We'd love to see you at {event} on {date} in {city}.",
            "Registration for {event} is now open. Places are limited to keep it small.",
            "This is a reminder that {event} takes place on {date}.",
        ),
        "bill_intro": (
            "Your bill for {month} is now available in your account.",
            "We've received your payment of {amount}. Thank you.",
            "Your statement for {month} is ready to view online.",
        ),
        "account_confirm": (
            "Please confirm that {email} is your email address by clicking the button below.",
            "To finish setting up your account, confirm your email address.",
        ),
        "account_password": (
            "The password for your {brand} account was changed on {date}.",
            "This is a confirmation that your password has been updated.",
        ),
        "account_signin": (
            "We noticed a new sign-in to your account from {device} in {city}.",
            "Your account was accessed from a new device: {device}.",
        ),
        "account_renewal": (
            "Your {plan} plan renews on {date}. You will be charged {amount}.",
            "Just a reminder: your subscription renews automatically on {date}.",
        ),
        "account_welcome": (
            "Thanks for joining {brand}. Here are a few things to help you get started.",
            "Your account is ready. We're glad to have you with us.",
        ),
        "account_update": (
            "The details on your account were updated on {date}.",
            "You changed the delivery address on your account.",
        ),
        "if_not_you": (
            "If this was you, there is nothing else to do.",
            "If you didn't make this change, please contact our support team.",
            "If this wasn't you, you can review your account security settings.",
        ),
        "help": (
            "Questions? Just reply to this email or visit our help centre.",
            "Need help? Our support team is available every day from 8 am to 8 pm.",
            "You can find answers to common questions in our FAQ.",
        ),
        "signoff": (
            "Thanks,",
            "Best wishes,",
            "Cheers,",
            "Kind regards,",
            "See you soon,",
            "Thank you,",
        ),
        "team": (
            "The {brand} team",
            "{brand} Customer Care",
            "{first} from {brand}",
            "{brand} Support",
        ),
        "footer_subscribed": (
            "You are receiving this email because you signed up at {domain}.",
            "You received this message because you are subscribed to {brand} updates.",
            "You're getting this email because you opted in to our newsletter.",
        ),
        "footer_unsubscribe": (
            "Unsubscribe",
            "Manage preferences",
            "Update your preferences",
            "Unsubscribe from this list",
        ),
        "footer_transactional": (
            "This is a service message about your account.",
            "You are receiving this email because of a recent order on {domain}.",
            "Please do not reply to this automated message.",
        ),
        "read_more": ("Read more", "Read the story", "Continue reading", "Find out more"),
        "shop_now": ("Shop now", "View product", "See details", "Buy now"),
        "view_order": ("View your order", "Manage your order", "Order details"),
        "track": ("Track your parcel", "Track package", "Follow your delivery"),
        "register": ("Register now", "Save my seat", "RSVP", "Book a place"),
        "calendar": ("Add to calendar", "Add to Google Calendar"),
        "confirm": ("Confirm email", "Verify my address", "Confirm"),
        "account_link": ("Go to my account", "Account settings", "Review activity"),
        "pay": ("View bill", "View statement", "Pay now", "See details"),
        "subtotal": ("Subtotal",),
        "shipping_cost": ("Shipping", "Delivery"),
        "tax": ("Tax", "VAT"),
        "total": ("Total", "Order total"),
        "paid_with": (
            "Paid with Visa ending in {last4}",
            "Paid with Mastercard ending in {last4}",
            "Payment: PayPal",
            "Paid with Apple Pay",
        ),
        "ship_to": ("Shipping to", "Delivery address"),
        "agenda": (
            "Opening and welcome",
            "Talk: {topic}",
            "Panel discussion",
            "Coffee and networking",
            "Q&A with the team",
            "Workshop: {topic}",
        ),
        "devices": (
            "Chrome on Windows",
            "Safari on iPhone",
            "Firefox on Linux",
            "the mobile app on Android",
            "Edge on Windows",
        ),
        "plans": ("Basic", "Plus", "Pro", "Family", "Team"),
    },
    "ru": {
        "newsletter_intro": (
            "Рассказываем, что нового в {brand} на этой неделе.",
            "Собрали для вас самые интересные материалы за последние дни.",
            "Спасибо, что читаете нас. Вот подборка этой недели.",
            "В этот раз коротко: три истории и один рецепт.",
            "Месяц выдался насыщенным — собрали всё в одном письме.",
            "Новинки, возвращение любимых товаров и кое-что, чем мы гордимся.",
        ),
        "sale_intro": (
            "Сезонная распродажа начинается сегодня и продлится до {date}.",
            "Участники клуба получают доступ к скидкам раньше всех.",
            "Мы снизили цены на несколько любимых товаров, пока они есть на складе.",
        ),
        "receipt_intro": (
            "Спасибо за покупку! Мы получили ваш заказ и сообщим, когда он будет отправлен.",
            "Это электронный чек по заказу №{order} от {date}.",
            "Оплата прошла успешно. Ниже — состав заказа.",
        ),
        "shipping_intro": (
            "Ваш заказ №{order} передан в службу доставки «{carrier}».",
            "Посылка покинула наш склад и прибудет до {date}.",
            "Заказ №{order} в пути. Отследить его можно по ссылке ниже.",
        ),
        "event_intro": (
            "Будем рады видеть вас на мероприятии «{event}» {date}, город {city}.",
            "Открыта регистрация на {event}. Количество мест ограничено.",
            "Напоминаем: {event} пройдёт {date}.",
        ),
        "bill_intro": (
            "Счёт за {month_nom} доступен в личном кабинете.",
            "Мы получили ваш платёж на сумму {amount}. Спасибо!",
            "Выписка за {month_nom} готова, её можно посмотреть онлайн.",
        ),
        "account_confirm": (
            "Подтвердите, что адрес {email} принадлежит вам: нажмите кнопку ниже.",
            "Чтобы завершить регистрацию, подтвердите адрес электронной почты.",
        ),
        "account_password": (
            "Пароль от аккаунта {brand} был изменён {date}.",
            "Подтверждаем, что пароль успешно обновлён.",
        ),
        "account_signin": (
            "Мы заметили вход в ваш аккаунт: {device}, город {city}.",
            "В аккаунт выполнен вход с нового устройства: {device}.",
        ),
        "account_renewal": (
            "Тариф «{plan}» продлится {date}. С карты будет списано {amount}.",
            "Напоминаем: подписка продлевается автоматически {date}.",
        ),
        "account_welcome": (
            "Спасибо, что присоединились к {brand}. Вот несколько советов для начала.",
            "Ваш аккаунт готов. Рады, что вы с нами!",
        ),
        "account_update": (
            "Данные вашего профиля были изменены {date}.",
            "Вы изменили адрес доставки в профиле.",
        ),
        "if_not_you": (
            "Если это были вы, ничего делать не нужно.",
            "Если вы не меняли настройки, напишите в нашу службу поддержки.",
            "Если это были не вы, проверьте настройки безопасности в личном кабинете.",
        ),
        "help": (
            "Остались вопросы? Просто ответьте на это письмо.",
            "Служба поддержки работает ежедневно с 9:00 до 21:00.",
            "Ответы на частые вопросы — в разделе «Помощь» на сайте.",
        ),
        "signoff": ("Спасибо!", "С уважением,", "Всего доброго,", "До встречи,", "Хорошего дня!"),
        "team": (
            "Команда {brand}",
            "Служба заботы {brand}",
            "{first}, {brand}",
            "Поддержка {brand}",
        ),
        "footer_subscribed": (
            "Вы получили это письмо, потому что подписались на рассылку на сайте {domain}.",
            "Вы подписаны на новости {brand}.",
            "Это письмо отправлено, потому что вы согласились получать нашу рассылку.",
        ),
        "footer_unsubscribe": (
            "Отписаться",
            "Настроить рассылки",
            "Отписаться от рассылки",
            "Управление подписками",
        ),
        "footer_transactional": (
            "Это служебное письмо о вашем аккаунте.",
            "Письмо отправлено в связи с заказом на сайте {domain}.",
            "Письмо сформировано автоматически, отвечать на него не нужно.",
        ),
        "read_more": ("Читать", "Читать дальше", "Подробнее", "Читать статью"),
        "shop_now": ("Купить", "Смотреть", "В каталог", "Выбрать"),
        "view_order": ("Посмотреть заказ", "Мои заказы", "Детали заказа"),
        "track": ("Отследить посылку", "Где мой заказ", "Статус доставки"),
        "register": ("Зарегистрироваться", "Записаться", "Участвовать", "Забронировать место"),
        "calendar": ("Добавить в календарь",),
        "confirm": ("Подтвердить адрес", "Подтвердить", "Подтвердить почту"),
        "account_link": ("Перейти в личный кабинет", "Настройки аккаунта", "История входов"),
        "pay": ("Посмотреть счёт", "Открыть выписку", "Оплатить", "Подробнее"),
        "subtotal": ("Товары", "Сумма"),
        "shipping_cost": ("Доставка",),
        "tax": ("В т. ч. НДС",),
        "total": ("Итого", "Итого к оплате"),
        "paid_with": (
            "Оплачено картой •••• {last4}",
            "Оплата: СБП",
            "Оплачено картой МИР •••• {last4}",
            "Оплата при получении",
        ),
        "ship_to": ("Адрес доставки", "Пункт выдачи"),
        "agenda": (
            "Открытие и приветствие",
            "Доклад: {topic}",
            "Круглый стол",
            "Кофе-брейк и знакомства",
            "Вопросы команде",
            "Практикум: {topic}",
        ),
        "devices": (
            "Chrome, Windows",
            "Safari, iPhone",
            "Firefox, Linux",
            "приложение для Android",
            "Яндекс Браузер, macOS",
        ),
        "plans": ("Базовый", "Плюс", "Про", "Семейный", "Команда"),
    },
}


PROSE: dict[str, tuple[str, ...]] = {
    "en": (
        "We have been working on this for a while, and we think you will like the result.",
        "Many of you wrote to us last month with questions, and we have tried to answer them "
        "all here.",
        "As always, the full story is on our web site, with photos and a few extras.",
        "Our team tested every item before it went on the site.",
        "If you have ideas for a future issue, reply to this message; we read every letter.",
        "Prices include tax; delivery times depend on where you live.",
        "The offer is open to all customers in {city} and online.",
        "Our shops close on public holidays, but orders placed online ship as usual.",
        "Thanks to everyone who sent in photos from {event}.",
        "Next month we will look at {topic}, so stay tuned.",
        "This season our buyers travelled further than ever to find new makers.",
        "Members who sign in before {date} get free delivery on their next order.",
    ),
    "ru": (
        "Мы долго работали над этим и надеемся, что результат вам понравится.",
        "В прошлом месяце вы прислали много вопросов — постарались ответить на все.",
        "Полная версия — на нашем сайте, с фотографиями и дополнениями.",
        "Каждый товар мы проверили перед тем, как выставить на сайт.",
        "Если у вас есть идеи для следующего выпуска, просто ответьте на это письмо.",
        "Цены указаны с учётом НДС, сроки доставки зависят от региона.",
        "Предложение действует в городе {city} и в интернет-магазине.",
        "В праздничные дни магазины закрыты, но заказы на сайте отправляются как обычно.",
        "В следующем месяце расскажем про {topic} — оставайтесь с нами.",
        "Участники клуба, вошедшие в личный кабинет до {date}, получат бесплатную доставку.",
    ),
}
